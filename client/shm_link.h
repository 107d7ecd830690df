// ShmLink: the client's side of its shared-memory link to rdmamsgd — its
// ShmChannel (common/shm_channel.h: a ring to the daemon, a ring from it,
// the payload area, the delivery area, two doorbells) as librdmamsg uses
// it; the daemon's side is daemon/local/shm_link.h.
//
// The link is offered at connect (SHM_OFFER, with the region's and
// doorbells' fds) and in use once the daemon accepts; from then on every
// frame goes through the rings, and fd() is an epoll set of this client's
// doorbell and the socket (which then carries only the daemon's closing
// ERROR, or its end). Its state changes in one place (StateMachine):
//
//   off → offered → in_use      accepted: every frame goes through the rings
//    ↑       └───→ refused      refused: the socket it is
//    └─ (withdrawn: the offer could not be sent)
//
// What it does, and nothing of the protocol beyond that:
//  - write(): the outgoing frame stream from the library's output buffer
//    into the ring, in records, as far as the ring has room; a large SEND
//    goes as one frame record, or into a block of the payload area named by
//    a payload record (sendLarge()), so that the daemon posts its payload
//    from where it lies; such a record queued behind other frames waits in
//    the output buffer, marked, and write() writes it in its turn;
//  - read(): records from the daemon's ring into the input buffer; a
//    DELIVER the daemon placed whole (in the delivery area) is shown by
//    delivery() and then held for a view or consumed;
//  - blocks of the payload area for claims (claimBlock(), freeBlock());
//  - the doorbells: arming before sleeping, disarming after, waking itself.
//
// Calls go one way: it reports failures as a Status (its owner then loses
// the connection) and never calls its owner.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "common/byte_buffer.h"
#include "common/local_protocol.h"
#include "common/ring.h"
#include "common/shm_channel.h"
#include "common/state_machine.h"
#include "common/status.h"
#include "common/unique_fd.h"
#include "rdmamsg/client.h"

namespace rdmamsg::client {

// The fields of one SEND frame, or of a PUB when `subject` is set
// (sendLarge()).
struct OutgoingSend {
  uint64_t id = 0;
  std::string_view node, service, fromService;
  std::span<const std::byte> payload;
  std::string_view subject = {};  // a PUB: its subject
  uint32_t timeoutMs = 0;         // a PUB: its request timeout (0: a publish)

  bool publish() const { return !subject.empty(); }
  size_t frameSize() const;
  // The whole frame into `at` (exactly frameSize() bytes), or all of it
  // but the payload already at the end of `at` (a claim's block).
  void encodeAt(std::span<std::byte> at) const;
  void encodeHeadAt(std::span<std::byte> at) const;
};

class ShmLink {
 public:
  enum class State : uint8_t { off, offered, refused, in_use };
  using Block = shm_payload::PayloadAllocator::Block;
  using FrameHold = ShmChannel::FrameHold;

  // Reads RDMAMSG_SHM_FRAME_RECORDS, RDMAMSG_SHM_PAYLOAD_AREA and
  // RDMAMSG_SHM_DELIVERY_AREA (=0 turns each off).
  ShmLink();

  State state() const { return state_.get(); }
  bool inUse() const { return state_.is(State::in_use); }

  // --- Set-up ------------------------------------------------------------
  // A channel of the capacities `opts` names, and SHM_OFFER appended to
  // `out`, whose bytes then go with fdsToPass(); false when there is no
  // shared memory here (the socket it is).
  bool offer(const ConnectOptions& opts, ByteBuffer& out);
  std::array<int, shm_channel::kFdCount> fdsToPass() const { return channel_->fdsToPass(); }
  void withdraw();  // the offer could not be sent
  void refuse();    // the daemon said no (offered)
  // SHM_ACCEPT (offered): in use; fd() polls the doorbell and `socketFd`.
  Status start(int socketFd);
  int pollFd() const { return epfd_.get(); }
  void closePollFd() { epfd_.reset(); }

  // --- Writing -----------------------------------------------------------
  // Writes `out` into the ring as far as it has room (the rest waits).
  Status write(ByteBuffer& out);
  // How a SEND or PUB went (sendLarge()): written (its record is in the ring);
  // queued (its payload record waits in `out`, marked); inStream: the
  // caller appends the frame to `out` (marked when it is to go as a frame
  // record).
  enum class LargeSend : uint8_t { written, queued, inStream };
  // A SEND or PUB, in place when it is large (or `claimed`: its payload already
  // lies at the end of that block, which is then the message's block
  // whatever happens). An error: the connection is lost, the block freed.
  Result<LargeSend> sendLarge(ByteBuffer& out, const OutgoingSend& send, const Block* claimed);
  // A block of the payload area for a claim of a frame of `frameSize` bytes
  // whose payload has `payloadSize`: nullopt when it goes in a private
  // buffer (not in use, too small, no room now).
  std::optional<Block> claimBlock(size_t frameSize, size_t payloadSize);
  void freeBlock(const Block& b) { channel_->freeBlock(b); }

  // --- Reading -----------------------------------------------------------
  // Appends records from the daemon to `in` (up to about `budget` bytes):
  // the bytes read; 0 when the ring is empty or a delivery waits.
  Result<size_t> read(ByteBuffer& in, size_t budget) { return channel_->read(in, budget); }
  // A DELIVER the daemon placed whole waits (read() stopped before it).
  bool deliveryWaiting() const { return channel_->frameWaiting(); }
  // That DELIVER, decoded (views into shared memory), once `unparsed` (the
  // input not parsed yet) is empty: protocol_error when it is not one
  // DELIVER or lies inside a frame.
  Result<proto::Frame> delivery(std::span<const std::byte> unparsed, uint32_t maxBody);
  // Keeps it where it lies until releaseDelivery() (a view), or consumes it
  // (copied).
  Result<FrameHold> holdDelivery() { return channel_->holdFrame(); }
  Status consumeDelivery() { return channel_->consumeFrame(); }
  Status releaseDelivery(const FrameHold& hold) { return channel_->releaseHeld(hold); }

  // --- Doorbells ---------------------------------------------------------
  // Tells the daemon this client sleeps (ring for records, and for room
  // when `waitingForRoom`): false when something came meanwhile.
  bool armForSleep(bool waitingForRoom) { return channel_->prepareToSleep(waitingForRoom); }
  bool armed() const { return channel_->armed(); }
  Result<bool> disarm() { return channel_->disarm(); }
  Status resetDoorbell() { return channel_->resetDoorbell(); }
  Status wakeSelf() { return channel_->wakeSelf(); }
  int wakeFd() const { return channel_->wakeFd(); }
  // A batch of trySend()s was queued: fd() is made readable once per batch
  // (so that the application calls back and the batch is written).
  Status wakeForBatch();
  void batchServed() { batchWake_ = false; }

  const ShmChannelCounters& counters() const { return channel_->counters(); }
  // doorbellRings and doorbellReads into `c` (nothing without a channel).
  void addCounters(ClientCounters& c) const;

 private:
  struct QueuedRecord {
    uint64_t at;  // where it starts, in bytes ever queued in the output buffer
    size_t size;
    uint32_t type;  // shm_ring::kFrameRecord or kPayloadRecord
  };
  template <typename Fill>
  Result<bool> putRecord(size_t size, uint32_t type, Fill&& fill);
  Status commitAndAnnounce();
  Result<LargeSend> sendInBlock(ByteBuffer& out, const Block& block);
  Result<LargeSend> sendInRecord(ByteBuffer& out, const OutgoingSend& send, size_t size);
  void queueRecord(const ByteBuffer& out, size_t size, uint32_t type);
  void consumed(ByteBuffer& out, size_t n);

  StateMachine<State> state_{State::off};
  std::optional<ShmChannel> channel_;  // from offer() until refused or withdrawn
  UniqueFd epfd_;                      // in use: the doorbell and the socket
  Ring<QueuedRecord> queued_;          // records waiting in the output buffer
  uint64_t outWritten_ = 0;            // bytes of the output buffer written so far
  bool batchWake_ = false;             // fd() made readable for the batch queued
  // Large SENDs go as frame records unless RDMAMSG_SHM_FRAME_RECORDS=0,
  // into the payload area unless that or RDMAMSG_SHM_PAYLOAD_AREA=0; large
  // DELIVERs come in the delivery area unless RDMAMSG_SHM_DELIVERY_AREA=0.
  bool frameRecords_, payloadArea_, deliveryArea_;
};

std::string_view toString(ShmLink::State s);
bool allowedEdge(ShmLink::State from, ShmLink::State to);

}  // namespace rdmamsg::client
