// What Outbound (outbound.h) writes messages into: the open batch of an
// established connection and the room left in it. Connection
// (connection.h) is one; Outbound needs nothing else of it, so it knows no
// verbs and its tests give it a batch buffer of their own.
#pragma once

#include <cstddef>
#include <span>

#include "daemon/external_payload.h"
#include "daemon/peer/protocol.h"

namespace rdmamsg::peer {

class SendRoom {
 public:
  // Bytes a message record may use now; opens a batch if none is open
  // (0: no buffer or credit for one).
  virtual size_t messageRoom() = 0;
  // The open batch (there is one after messageRoom() returned more than 0).
  virtual BatchWriter& batch() = 0;
  // The open batch is full: it is queued to go, and the next messageRoom()
  // opens another.
  virtual void sealBatch() = 0;
  // Whether payloads lying in `area` can be posted from there on this link
  // (its memory registered with the device, now if need be).
  virtual bool canPostInPlace(ExternalArea& area) = 0;
  // Ends the open batch, whose last record is a message head
  // (BatchWriter::addMessageHead), with `bytes` of `payload` posted from
  // where they lie, and seals it; the send holds the payload (a share of
  // the handle) until it is done.
  virtual void sealInPlace(const PayloadHandle& payload, std::span<const std::byte> bytes) = 0;

 protected:
  ~SendRoom() = default;
};

}  // namespace rdmamsg::peer
