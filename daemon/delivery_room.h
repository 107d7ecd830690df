// DeliveryRoom: where a fragmented message from a peer is put together when
// the layer that delivers it offers room at the message's first fragment —
// a block of the listening client's shared memory (local::DeliveryBlock) —
// so that each fragment is written once, where the listener reads it, and
// not into a reassembly buffer first and copied again.
//
// The peer (peer::Inbound) writes the fragments into payload() and hands
// the room back with the whole message (peer::PeerEvents::deliverIncoming);
// the deliverer either delivers the message in the room or copies it from
// there. A room not delivered in is given back when it is destroyed.
#pragma once

#include <cstddef>
#include <span>

namespace rdmamsg {

class DeliveryRoom {
 public:
  virtual ~DeliveryRoom() = default;
  // Room for all of the payload's bytes, exactly.
  virtual std::span<std::byte> payload() = 0;
};

}  // namespace rdmamsg
