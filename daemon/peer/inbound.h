// A peer's receiving side: the message records of one connection, in
// sequence, reassembled into messages — in a room the layer above offers
// for a fragmented one (daemon/delivery_room.h: where it is delivered), or
// in the peer's own buffer. Verbs-free, like Outbound: the peer
// hands it every kMessage record in arrival order and acts on what it says
// — a whole message to deliver, one over max_message_size to answer
// too_large (nothing of it is kept), or a violation that closes the
// connection (out of sequence, fragments that do not add up).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "config/config.h"
#include "daemon/delivery_room.h"
#include "daemon/peer/protocol.h"

namespace rdmamsg::peer {

class Inbound {
 public:
  // Reads max_message_size from `cfg` at every first fragment (a reload may change it).
  explicit Inbound(const config::Config& cfg) : cfg_(cfg) {}
  // Asked at a fragmented message's first fragment for room for all of its
  // payload (src, dst, total); null: the own buffer.
  using RoomSource =
      std::function<std::unique_ptr<DeliveryRoom>(std::string_view, std::string_view, uint64_t)>;
  void setRoomSource(RoomSource source) { rooms_ = std::move(source); }

  // What a record made of the message it belongs to.
  struct Part {
    enum class Kind {
      kMore,      // a fragment kept; the message is not whole yet
      kMessage,   // seq, src, dst, payload: a whole message
      kTooLarge,  // seq: over max_message_size, to be answered too_large
    };
    Kind kind = Kind::kMore;
    uint64_t seq = 0;
    std::string_view src, dst;
    std::span<const std::byte> payload;  // valid until the next record
    DeliveryRoom* room = nullptr;        // kMessage: the room `payload` fills, if any
  };

  // The next kMessage record of this connection; protocol_error naming the
  // violation (out of sequence, fragments that do not add up) when the
  // connection must close.
  Result<Part> onRecord(const Record& r);
  // A new connection: sequence numbers start at 1, nothing partly received.
  void reset();
  // A message is partly received.
  bool midMessage() const { return active_; }
  // A resume (peer.h): the first message not received whole (a message
  // partly received counts as not received), and forgetting such a part —
  // the sender sends that message again from its start, under its number.
  uint64_t resumePoint() const { return active_ ? seq_ : expectedSeq_; }
  void dropPartial();
  // Gives back the room of the last message (after it was delivered).
  void dropRoom() { room_.reset(); }

 private:
  Result<Part> first(const Record& r, bool last);
  Result<Part> next(const Record& r, bool last);
  static Status violation(const char* why) { return Status(Errc::protocol_error, why); }
  static Part tooLarge(uint64_t seq) { return {Part::Kind::kTooLarge, seq, {}, {}, {}, nullptr}; }
  void keep(std::span<const std::byte> fragment);  // the next fragment's bytes

  const config::Config& cfg_;
  uint64_t expectedSeq_ = 1;
  // The message being reassembled (active_), or skipped (discard_).
  bool active_ = false;
  bool discard_ = false;
  uint64_t seq_ = 0, total_ = 0;
  std::string src_, dst_;
  std::vector<std::byte> bytes_;        // without a room
  std::unique_ptr<DeliveryRoom> room_;  // the message's room, if it has one
  uint64_t filled_ = 0;                 // bytes of it received
  RoomSource rooms_;
};

}  // namespace rdmamsg::peer
