// ShmLink: the shared-memory half of a local client's connection — its
// ShmChannel (common/shm_channel.h: two rings, a payload area, a delivery
// area, two doorbells) as the daemon's loop uses it.
//
// A Session (session.h) owns one once its client's SHM_OFFER is accepted;
// from then on the session's frames come from the ring to the daemon and
// go to the ring to the client, and the socket only says when the client
// ends. The link does the ring's I/O and nothing of the protocol: it reads
// records into the session's input buffer, writes the session's output
// buffer into records, writes frames in place (a record, or a block of
// the delivery area), and hands out the large SENDs the client wrote as
// frame records, their payloads held where they lie (PayloadHandle,
// external_payload.h).
//
// Calls go one way: the doorbell's event runs the callback its session
// gave (the session decides what to read), and the link never calls its
// session. Its state changes in one place (StateMachine):
//
//   open → broken → closed      a ring the client corrupted: nothing more
//     └──────────────┘          is read or written; closed: the session
//                               ends, the doorbell is no longer watched
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/byte_buffer.h"
#include "common/local_protocol.h"
#include "common/shm_channel.h"
#include "common/state_machine.h"
#include "common/status.h"
#include "daemon/external_payload.h"
#include "daemon/local/delivery_block.h"
#include "daemon/loop/event_loop.h"
#include "daemon/loop/events.h"

namespace rdmamsg::local {

// What writing a session's output did.
enum class FlushResult : uint8_t { drained, blocked, failed };

class ShmLink {
 public:
  enum class State : uint8_t { open, broken, closed };

  // `name` names the client in log lines; `onDoorbell` runs when the
  // client rang (records came, or room it waited for) and when kick()ed.
  ShmLink(loop::EventLoop& loop, std::unique_ptr<ShmChannel> channel, std::string name,
          std::function<void()> onDoorbell);
  ~ShmLink();
  ShmLink(const ShmLink&) = delete;
  ShmLink& operator=(const ShmLink&) = delete;

  State state() const { return state_.get(); }
  bool open() const { return state_.is(State::open); }
  // Open, and neither ring failed since (a commit can break one).
  bool intact() const { return open() && channel_->status().ok(); }
  const ShmChannel& channel() const { return *channel_; }
  // ok, or why the link broke (the client's protocol error).
  Status status() const { return channel_->status(); }
  // Closed: no more callbacks; what is held stays valid until let go.
  void close();

  // --- the doorbell ------------------------------------------------------
  // After a ring: takes back what was armed; false (broken) when the
  // doorbell could not be read.
  bool disarm();
  // Runs the doorbell's callback on this loop iteration (work cut short
  // by a budget, or records that may be there already).
  void kick();
  // A loop that spins (loop/spin.h) polls instead of sleeping on the
  // doorbell: whether the client wrote records (when `reading`), or
  // released room this side waits for.
  bool news(bool reading) const;
  // Before the loop sleeps: asks to be rung for records (when `reading`)
  // and for room it waits for; false when work came meanwhile.
  bool armForSleep(bool reading);

  // --- input -------------------------------------------------------------
  // Copies records into `in` up to `budget` bytes (the one read of their
  // bytes), or until a frame record is next (frameWaiting()); then, when
  // the ring is empty and the loop does not spin, asks to be rung for the
  // next. Records past the budget: kick()ed for the next iteration.
  // False: the ring is corrupt (broken; status() says why).
  bool read(ByteBuffer& in, size_t budget);
  // Everything the client wrote, now (it closed: its last CONSUMED and BYE
  // are in the ring).
  void drain(ByteBuffer& in);
  bool frameWaiting() const { return open() && channel_->frameWaiting(); }
  // The SEND or PUB a frame record holds, its head (ids, names or the
  // subject) decoded from a private copy. A large payload stays where it lies, held by `payload`
  // (the caller lets go when done: a send posted from it holds it
  // longer); a small one, or one past the records a ring may hold, is
  // copied and its record released (`payload` empty). `error`: a protocol
  // error; nothing was taken.
  struct FrameRecord {
    proto::Frame frame;
    PayloadHandle payload;
    Status error;
  };
  FrameRecord takeFrameRecord(uint32_t maxBody);
  // Bytes of the ring read and not given back.
  uint64_t heldBytes() const { return channel_->heldBytes(); }

  // --- output ------------------------------------------------------------
  // Moves `out` into the client's ring; blocked when the ring is full (the
  // client's release rings the doorbell).
  FlushResult flush(ByteBuffer& out);
  // A frame of `size` bytes written by `fill` straight into the client's
  // ring as one record, when it has room for it now.
  template <typename Fill>
  bool writeInPlace(size_t size, Fill&& fill);
  // A block of the client's delivery area for a DELIVER of `size` bytes,
  // `payload` of them its payload (null: no area, too small, or no room),
  // and its payload record into the ring once the frame is written (false,
  // the block left to the caller, when the ring has no room now).
  std::unique_ptr<DeliveryBlock> reserveBlock(SessionId session, size_t size, size_t payload);
  bool publishBlock(DeliveryBlock& block);
  // The last flush found the ring to the client full.
  bool waitingForRoom() const { return waitingForRoom_; }

  // What a client may have written before it could read a HOLD: its ring
  // and the payload area's blocks its records name.
  size_t holdSlack() const;

 private:
  bool spinning() const;
  void setState(State next);
  void countSyscalls();  // the channel's doorbell calls into loop::syscalls()
  void relieve();        // asks holders to spill past half of the ring held
  Result<size_t> takeRecords(ByteBuffer& in, size_t budget);
  bool readRecords(ByteBuffer& in, size_t budget);
  bool failed(std::string_view what, const Status& why);  // broken: logs once; false

  loop::EventLoop& loop_;
  const std::string name_;
  StateMachine<State> state_{State::open};
  // Declared before what holds it: shared with the PayloadHolds of frames
  // held past the session (they keep its mapping and registrations).
  std::shared_ptr<ShmChannel> channel_;
  std::shared_ptr<ExternalArea> ring_;         // the ring to the daemon, as devices register it
  std::shared_ptr<ExternalArea> payloadArea_;  // the payload area, when the client has one
  std::vector<std::byte> frameCopy_;           // a frame record's head, or all of a small one
  uint64_t wakesCounted_ = 0, readsCounted_ = 0;
  bool waitingForRoom_ = false;  // the ring to the client was full at the last flush
  loop::IoEvent doorbell_;       // the channel's wakeFd, EV_READ|EV_PERSIST|EV_ET
};

std::string_view toString(ShmLink::State s);
bool allowedEdge(ShmLink::State from, ShmLink::State to);

template <typename Fill>
bool ShmLink::writeInPlace(size_t size, Fill&& fill) {
  if (!intact() || size > channel_->maxRecord()) return false;
  Result<std::span<std::byte>> room = channel_->reserveRecord(size);
  if (!room) return false;
  fill(room->first(size));
  // A commit that fails broke the ring: the flush sees it and ends the session.
  return channel_->commitRecord().ok();
}

}  // namespace rdmamsg::local
