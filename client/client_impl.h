// librdmamsg's private state behind rdmamsg::Client, shared by the files
// that implement it: client.cc (connection, I/O, sending, receive()) and
// receive_view.cc (receiveView(): messages read in place).
#pragma once

#include <cstdlib>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/byte_buffer.h"
#include "common/local_protocol.h"
#include "common/ring.h"
#include "common/shm_channel.h"
#include "common/unique_fd.h"
#include "rdmamsg/client.h"

namespace rdmamsg {
namespace detail {

inline constexpr size_t kReadChunk = 256 * 1024;

// Received messages reuse their strings: a stream's names are usually the
// previous message's, so they are compared rather than copied.
inline void assignIfChanged(std::string& to, std::string_view from) {
  if (to != from) to.assign(from);
}

// What receiving says while a view is held.
inline Status viewHeldError() {
  return Status(Errc::bad_request, "a MessageView is held: release() it before receiving again");
}

}  // namespace detail

struct Client::Impl {
  UniqueFd fd;
  std::string socketPath;
  std::string nodeName;
  uint32_t maxMessage = 0;
  uint32_t maxBody = proto::kDefaultMaxBody;
  ByteBuffer in{detail::kReadChunk};
  ByteBuffer out{detail::kReadChunk};
  uint64_t nextId = 1;
  ClientCounters io;  // socket and poll calls (the doorbells' are the channel's)
  size_t inFlight = 0;
  // Confirmation on consumption: messages handed to the application, how
  // many of them may be reported taken (all of them, or with
  // confirmOnReceive off, those up to the last confirmReceived()), and how
  // many have been reported with CONSUMED.
  uint64_t taken = 0, takenMark = 0, reported = 0;
  bool confirmOnReceive = true;
  // Destinations the daemon told us to HOLD, until their RESUME.
  std::vector<std::pair<std::string, std::string>> held;
  Status conn;  // ok while connected
  // Shared memory: offered at connect, in use once the daemon accepted.
  // The socket then carries no frames but a closing ERROR, read into sockIn.
  std::unique_ptr<ShmChannel> shm;
  bool shmOffered = false, shmDecided = false, shmInUse = false;
  ByteBuffer sockIn{4096};
  UniqueFd epfd;  // fd() with shared memory: the doorbell and the socket
  IdleStrategy idle = IdleStrategy::sleep;
  std::chrono::steady_clock::time_point
      nextSocketLook{};  // spinning: when to look at the socket next
  Ring<Message> inbox;
  // Completions not taken yet, in arrival order; an ACK range is one entry.
  struct Pending {
    uint64_t first = 0;
    uint64_t count = 0;  // ids first .. first + count - 1 (1 for an error)
    Status status;
  };
  Ring<Pending> completions;
  bool welcomed = false;
  bool outBlocked = false;                  // trySend said would_block for a full buffer
  std::string checkedNode, checkedService;  // the last valid destination names
  // The one outstanding blocking request of each kind.
  std::optional<Status> registerReply;
  std::string registerService;
  std::optional<Result<std::string>> statusReply;

  void lose(Status why) {
    if (conn.ok()) conn = std::move(why);
    fd.reset();
    epfd.reset();
  }

  // Write and read what they can without waiting; a failure is `conn`.
  void writeSome();
  void readSome();
  void writeRing();
  void readRing();
  void readSocket(ByteBuffer& into);  // whatever the socket has (its end: lose)
  // With shared memory: before sleeping on the doorbell (and socket), says
  // so to the daemon; false when something arrived meanwhile.
  bool armForSleep() { return shm->prepareToSleep(!out.empty()); }
  // A large SEND over shared memory (shm_channel.h): written (its payload
  // record or frame record is in the ring; also when the connection was
  // lost: its error answers); queued (its payload record waits in `out`,
  // marked); or inStream: the caller queues the frame in `out` (marked in
  // frameRecordsQueued when writeRing() is to write it as a frame record).
  enum class LargeSend : uint8_t { written, queued, inStream };
  // `claimed`: the payload already lies at the end of this block (claim()),
  // which is then the message's block whatever happens.
  using Block = shm_payload::PayloadAllocator::Block;
  LargeSend sendInFrameRecord(uint64_t id, std::string_view node, std::string_view service,
                              std::string_view fromService, std::span<const std::byte> payload,
                              const Block* claimed);
  // Records queued in `out` — SEND frames that go as frame records, and
  // payload records' bodies: where each starts (in bytes ever queued in
  // `out`), its size and its record type. outWritten: bytes of `out`
  // written into the ring so far.
  struct QueuedRecord {
    uint64_t at;
    size_t size;
    uint32_t type;
  };
  std::deque<QueuedRecord> frameRecordsQueued;
  template <typename Fill>
  bool putFrameRecord(size_t size, uint32_t type, Fill&& fill);
  uint64_t outWritten = 0;
  // Large SENDs go as frame records unless RDMAMSG_SHM_FRAME_RECORDS=0,
  // into a payload area unless that or RDMAMSG_SHM_PAYLOAD_AREA=0.
  static bool envOn(const char* name) {
    const char* v = std::getenv(name);
    return v == nullptr || std::string_view(v) != "0";
  }
  bool frameRecords = envOn("RDMAMSG_SHM_FRAME_RECORDS");
  bool payloadArea = frameRecords && envOn("RDMAMSG_SHM_PAYLOAD_AREA");
  // Large DELIVERs come in a delivery area unless RDMAMSG_SHM_DELIVERY_AREA=0.
  bool deliveryArea = envOn("RDMAMSG_SHM_DELIVERY_AREA");
  // Everything queued is written: into the socket, or into the ring while
  // the daemon's socket is open (a ring does not fail when its reader died).
  bool allWritten() {
    if (!out.empty()) return false;
    if (shmInUse) readSocket(sockIn);
    return conn.ok();
  }
  void startSharedMemory();
  void offerSharedMemory(const ConnectOptions& opts);
  // What processIo() does: consumption reported, written, read.
  void pump() {
    parseInput(in);  // frames left behind an in-place view
    if (shmInUse) return pumpRings();
    reportConsumed();
    writeSome();
    readSome();
  }
  void pumpRings();
  void settleRings();
  // settleRings() where the strategy sleeps; spinning ones leave the daemon
  // unasked to ring (the application calls prepareToPoll() before it polls).
  void settleIfSleeping() {
    if (idle == IdleStrategy::sleep) settleRings();
  }
  bool prepareToPoll();
  // Spinning: reads the socket once every kSocketLook (a closing ERROR, its end).
  void lookAtSocketNowAndThen(std::chrono::steady_clock::time_point now);
  // Adaptive and busy: moves frames without sleeping until done(), until
  // something moved, or the spin ends (adaptive: kAdaptiveSpin; busy: the
  // deadline). false when the spin ended with nothing to show: sleep.
  template <typename Done>
  bool spinOnRings(Done& done, std::chrono::steady_clock::time_point deadline);
  bool batchWake = false;  // fd() made readable for a batch trySend queued
  void reportConsumed();
  bool isHeld(std::string_view node, std::string_view service) const;
  void setHeld(const proto::Frame& f, bool on);
  void parseInput(ByteBuffer& from);
  void handleFrame(const proto::Frame& f);
  void handleError(const proto::Frame& f);
  void takeFront(Completion& c);
  void takeMessage(Message& m);
  // After a message was taken: counts it and, with confirmOnReceive and
  // nothing more read, tells the daemon at once.
  void noteTaken();
  // Whether everything read is taken: nothing queued, no complete frame in `in`.
  bool allReadTaken() const;
  // The views of receiveView() (receive_view.cc): at most one is held. An
  // in-place view points into `in`, pinned until release(); a copied view
  // into `viewCopy`.
  Message viewCopy;
  uint64_t viewHandle = 0;  // the held view's handle, 0: none held
  uint64_t lastHandle = 0;
  bool wantView = false;   // parseInput() stops at a DELIVER at the front of `in`
  bool viewReady = false;  // it stopped there: `in` starts with that DELIVER (or viewBlock)
  bool viewAvailable() const { return viewReady || !inbox.empty(); }
  void prepareView();
  Status waitForView(std::chrono::milliseconds timeout);  // waitFor(viewAvailable)
  void takeView(MessageView& v);
  void takeInPlace(MessageView& v);
  void takeCopied(MessageView& v);
  // A DELIVER the daemon placed in the delivery area (shm_channel.h), next
  // in the ring: held for the view receiveView() waits for (viewReady), or
  // copied into the inbox and its block given back at once. True when it
  // was taken and reading goes on; false when it waits (a view is ready) or
  // the connection was lost.
  bool takeDeliveryBlock();
  void takeFromBlock(MessageView& v);
  std::optional<ShmChannel::FrameHold> viewBlock;  // the ready or held view's block
  proto::Frame viewBlockFrame;                     // its DELIVER, decoded (views into the block)
  // Queues a SEND; with `mayWait`, waits for the socket when more than
  // kWriteBlockLimit is unwritten (send()), else returns would_block first
  // (trySend()).
  Result<uint64_t> queueSend(std::string_view node, std::string_view service,
                             std::span<const std::byte> payload, std::string_view fromService,
                             bool mayWait, const Block* claimed = nullptr);
  Status checkSend(std::string_view node, std::string_view service, std::string_view fromService,
                   size_t size);
  // The claim of claim() (send_claim.cc): at most one is held. Its payload
  // is the end of claimBlock (in place), or claimCopy.
  uint64_t claimHandle = 0;  // 0: none held
  std::string claimNode, claimService, claimFrom;
  size_t claimSize = 0;
  std::optional<Block> claimBlock;
  std::vector<std::byte> claimCopy;
  bool claimTaken = false;  // sendInFrameRecord() took claimBlock: the daemon's, or freed
  Result<uint64_t> commitClaim(SendClaim& c, bool mayWait);
  void dropClaim(SendClaim& c);
  bool take(uint64_t msgId, Completion& c);
  template <typename Done>
  Status waitFor(Done done, std::chrono::milliseconds timeout);
  template <typename Done>
  Status waitUntil(Done done, std::chrono::milliseconds timeout);
  void sleepOnRing(int ms);
};

}  // namespace rdmamsg
