// The sending side of a peer: this node's flows to it, their windows and
// queues, and every message in flight until the peer confirms it.
//
// A flow is this node's traffic to one service of the peer. Each flow has a
// window (the peer's flow_window, from its Hello): a message costs
// windowCost() bytes from when it is sent until its CONFIRM arrives, and a
// flow starts a message only while its unconfirmed bytes leave room (or
// when it has none, so any message can go). The peer confirms a message
// when its listener takes it, so a listener that does not read stalls only
// its own flow: its messages wait in the flow's queue here, the other flows
// keep the link.
//
// Messages are written straight into the connection's open batch (a
// SendRoom, send_room.h: Outbound knows nothing else of the connection)
// when they can be (no copy, no allocation); otherwise they wait in their
// flow's queue, written in turn by pump(). A message once started is finished
// before any other starts (the peer reassembles one message at a time).
// Sequence numbers are given as messages go on the wire.
//
// Backpressure, per flow: a flow with more than send_queue_limit queued (or,
// once the peer has 8 × that queued over all its flows, a second message)
// holds the clients that fill it (send() returns the flow's key) until it
// drains to half. Other flows are never held by it.
//
// Payloads that lie in a client's shared memory (PayloadHandle,
// external_payload.h) wait in their flow's queue where they lie, held by
// their handles, when they wait only for the link (or lie in a block that
// pins only itself). When the client's area wants its room back it marks
// this holder (spillRequested); the peer's service step then copies them
// into the queue and lets go (serveSpills).
//
// Every accepted message gets exactly one outcome: delivered (confirmed),
// an error confirmed by the peer, timeout (message_timeout passed), or
// peer_unreachable (the connection was lost first).
//
// Resume (a peer with several rails, peer.h): with retain() on, every
// message started is kept whole, in sequence order, until it is settled;
// when the session goes on over a new connection, resume() names the first
// message the peer did not receive whole and pump() sends that one and
// every later one again, under their numbers, before anything new. Their
// senders see one outcome, as ever; the peer may then confirm a message
// twice (once on each connection), which settles it once.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/byte_buffer.h"
#include "common/latency_histogram.h"
#include "common/ring.h"
#include "common/status.h"
#include "config/config.h"
#include "daemon/peer/events.h"
#include "daemon/peer/send_room.h"

namespace rdmamsg::peer {

struct OutFlowStats {
  std::string service;
  uint64_t unconfirmed = 0;  // window bytes sent and not confirmed
  size_t queuedBytes = 0;
  size_t queuedMessages = 0;
  bool paused = false;
};

class Outbound final : public ExternalHolder {
 public:
  using Clock = std::chrono::steady_clock;

  // `peerId` names the peer in flow keys; `wake` marks the peer for its
  // service step (a spill was requested).
  Outbound(const config::Config& config, const std::string& peerName, uint64_t peerId,
           PeerEvents& events, std::function<void()> wake);
  ~Outbound();
  Outbound(const Outbound&) = delete;
  Outbound& operator=(const Outbound&) = delete;

  // A new connection: sequence numbers start at 1, with the peer's limits
  // (`keepSequence`: the session goes on, only the limits are new).
  void reset(uint64_t remoteWindow, uint64_t remoteMaxMessage, bool keepSequence = false);

  // Keeps every message started from now on until it is settled (resume).
  void retain(bool on) { retain_ = on; }
  bool retains() const { return retain_; }
  // The lowest message not settled (every outcome before it is in).
  uint64_t lowestUnsettled() const { return baseSeq_; }
  // The peer received every message before `next` whole: those from `next`
  // on go again first. protocol_error when `next` is not one of the
  // messages sent and not settled (or the one after them).
  Status resume(uint64_t next);
  uint64_t resent() const { return resent_; }  // messages sent again
  size_t keptBytes() const { return kept_.size(); }

  // Accepts a message for `room` (an established connection), or only
  // queues it when `room` is null (no connection yet, or one that starts no
  // new message: pump() sends it later). Errors: too_large. Admitted::holdOn
  // is set when the client should send no more to `dst` until
  // queueDrained(key). `inPlace`: the payload lies in memory the link may
  // post from (external_payload.h); what goes at once of a payload of at
  // least kMinInPlace bytes is then posted from there, not copied, and what
  // waits only for the link waits there (the rest is copied to the queue).
  // The caller holds the payload until send() returns; the sends and the
  // queue that keep it take shares.
  static constexpr size_t kMinInPlace = 16 * 1024;
  Result<Admitted> send(SendRoom* room, uint64_t session, uint64_t msgId, std::string_view src,
                        std::string_view dst, std::span<const std::byte> payload,
                        const PayloadHandle* inPlace = nullptr);

  // Writes what the windows and the link allow, each ready flow up to a
  // turn's bytes. True when a flow is still ready and the link has room:
  // only the turn ended it, and the caller runs another (the peer marks
  // itself for service again). Service step only.
  bool pump(SendRoom& room);
  // The peer confirmed [first, last] with `errc`. protocol_error when it
  // named a message that is not in flight (or confirmed one twice).
  Status settle(uint64_t first, uint64_t last, Errc errc);
  // Fails what has passed message_timeout (queued or unconfirmed).
  // `notConnected`: why there is no connection, for queued messages' errors.
  void expire(std::string_view notConnected = {});
  // The connection is gone: everything fails with `why`.
  void failAll(const Status& why);

  // ExternalHolder: `area` wants its room back (marks the peer).
  void spillRequested(ExternalArea& area) override;
  // The service step: copies the payloads of every area that asked into
  // the queues and lets go of them.
  void serveSpills();

  // Whether a message of `cost` to `service` would start now: nothing
  // queued before it and room in its window.
  bool wouldStart(std::string_view service, uint64_t cost) const;
  size_t queuedBytes() const { return totalQueued_; }
  // Memory the flows' queues hold (what they grew to for bursts still queued).
  size_t bufferBytes() const;
  // Nothing on the wire and nothing unconfirmed (queued messages aside).
  bool settled() const { return unsettled_ == 0 && current_ == nullptr; }
  size_t inFlight() const { return unsettled_; }
  uint64_t confirmed() const { return confirmed_; }  // outcomes the peer confirmed
  uint64_t failed() const { return failed_; }        // timed out or lost with the connection
  std::vector<OutFlowStats> flowStats() const;
  // From a message's first fragment on the link to its confirmation
  // (delivered to the listener), for a sample of the messages confirmed.
  const LatencyHistogram& deliveryLatency() const { return latency_; }

 private:
  struct Flow;
  struct Queued;
  struct InFlight {
    uint64_t session = 0, msgId = 0;
    Flow* flow = nullptr;
    uint32_t cost = 0;
    bool done = false;      // confirmed (window returned)
    bool reported = false;  // its sender has its outcome
    Clock::time_point deadline;
    Clock::time_point sentAt{};  // set for 1 in kLatencySample messages
  };
  // Messages whose time from the link to the peer's confirmation is measured.
  static constexpr uint64_t kLatencySample = 16;
  Clock::time_point sampleTime(uint64_t seq) const {
    return seq % kLatencySample == 0 ? Clock::now() : Clock::time_point{};
  }

  Flow& flowFor(std::string_view service);
  bool canStart(const Flow& f, uint64_t cost) const;
  void makeReady(Flow& f);
  // Starts the front message of `f` (gives it a seq) and writes what fits.
  bool startFront(SendRoom& room, Flow& f);
  bool continueFront(SendRoom& room, Flow& f);
  // Writes (the rest of) a message; true when all of it is in batches.
  bool write(SendRoom& room, uint64_t seq, std::string_view src, std::string_view dst,
             std::span<const std::byte> payload, uint64_t& offset, bool& started,
             const PayloadHandle* inPlace = nullptr);
  // One record of `inPlace`'s payload from `offset`, posted from where it
  // lies: false when the open batch has too little room left for one.
  bool writeInPlace(SendRoom& room, const PayloadHandle& inPlace, uint64_t seq,
                    std::string_view src, std::string_view dst, std::span<const std::byte> payload,
                    uint64_t& offset, bool& started);
  // `inPlace`: the payload stays where it lies, held (else it is copied).
  void enqueue(Flow& f, uint64_t session, uint64_t msgId, Clock::time_point deadline,
               std::string_view src, std::span<const std::byte> rest, bool started, uint32_t cost,
               PayloadHandle inPlace);
  void spill(ExternalArea& area);
  FlowKey keyOf(const Flow& f) const;
  // Resume (outbound_resume.cc): a started message kept whole, the kept
  // ones of settled messages dropped, and the ones to send again written.
  void keep(uint64_t seq, std::string_view src, std::span<const std::byte> payload);
  void dropKept(uint64_t seq);
  bool resending() const { return resend_.next < resend_.end; }
  bool writeResent(SendRoom& room);
  void popFront(Flow& f);
  void report(InFlight& m, Errc errc);
  // At each tick: a flow found drained gives back what a burst made its
  // queue grow to (one drained and refilled within a tick keeps it, so a
  // stream of large messages does not allocate a queue per message).
  void releaseIdleQueues();
  void collectIdleFlows();
  std::string timeoutText(const std::string& service, std::string_view notConnected = {}) const;

  const config::Config& config_;
  const std::string& peerName_;
  const uint64_t peerId_;
  PeerEvents& events_;
  std::function<void()> wake_;
  uint64_t nextFlow_ = 1;
  uint64_t remoteWindow_ = 0, remoteMaxMessage_ = 0;

  std::unordered_map<std::string, std::unique_ptr<Flow>> flows_;
  Flow* lastFlow_ = nullptr;  // flowFor()'s memory: a stream names one service
  std::vector<Flow*> ready_;  // flows with queued messages and window, in turn
  size_t readyNext_ = 0;
  Flow* current_ = nullptr;  // its front message is started: finished first
  size_t totalQueued_ = 0;
  // Queued messages whose payload waits in place, by area (registered as
  // its holder while there are any), and the areas that asked for a spill.
  std::unordered_map<ExternalArea*, size_t> heldIn_;
  std::vector<ExternalArea*> spillWanted_;
  template <typename F>
  static void forEachQueued(const Flow& flow, F&& f);
  void holdIn(ExternalArea& area, size_t bytes);
  void letGo(PayloadHandle p, size_t bytes);  // the handle goes last: it may end the area

  uint64_t nextSeq_ = 1;
  uint64_t baseSeq_ = 1;  // seq of inflight_.front()
  Ring<InFlight> inflight_;
  size_t unsettled_ = 0;
  uint64_t confirmed_ = 0, failed_ = 0;
  LatencyHistogram latency_;
  // Resume: the messages kept (keep()), each a Kept header, its sender's
  // name and its payload, for the messages keptFrom_ .. nextSeq_ - 1; the
  // ones being sent again (their `at` is an offset into kept_); whether a
  // confirmation may come twice (after a resume).
  struct Kept {
    uint64_t seq;
    uint32_t length;
    uint8_t srcLen;
  };
  bool retain_ = false;
  ByteBuffer kept_;
  uint64_t keptFrom_ = 1;
  struct {
    uint64_t next = 0, end = 0, offset = 0;
    size_t at = 0;
    bool started = false;
  } resend_;
  bool repeatsSettle_ = false;
  uint64_t resent_ = 0;
  // Runs of one client's confirmed ids, settled with one call.
  uint64_t runSession_ = 0, runFirst_ = 0, runCount_ = 0;
};

}  // namespace rdmamsg::peer
