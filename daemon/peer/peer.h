// A configured peer daemon: its state, its current connection, what this
// node sends to it (Outbound) and what it sends us.
//
// State (one checked transition point, setState):
//
//   idle → connecting → established → backoff → connecting → …
//               └──────────→ backoff ──┘
//   connecting, established → stopping → stopped   (while a connection closes)
//   idle, backoff → stopped                        (no connection to close)
//
// Every failure of a connection — one that fails at once (no route, no
// device), is refused, times out or is lost — is seen the same way: the
// service step finds the connection down, and the peer goes to backoff and
// schedules the next dial (exponential backoff with jitter). Both ends dial;
// the mesh keeps exactly one connection per pair (mesh.h).
//
// Calls go one way. The loop runs the peer's timers and its service step
// (Mesh runs it for every peer marked on the service queue); the connection
// only marks it. service() reads the connection's state and received
// batches, hands messages to the router (PeerEvents) and writes what is
// queued. The router calls send() and confirmLater(), which only queue work
// and mark the peer: they never call back into the router.
//
// Inbound: the peer always takes batches off the link. A message goes to
// its listener's queue at once and is confirmed when the listener's
// application has taken it, so the flow's window (not the link) holds back
// a listener that does not keep up: the link's credits keep flowing and
// liveness never depends on consumers. (Past receive_memory_limit the
// router answers a stuck listener's messages busy; the link still drains.)
//
// Liveness: a heartbeat when nothing was sent for heartbeat_interval (a
// batch without messages: it always has its reserved credit); a peer silent
// for heartbeat_timeout is disconnected.
//
// Connect on demand (connect: on_demand): the peer is not dialed at start; it
// stays idle until a local client sends it a message, which is queued (the
// usual send_queue_limit and message_timeout apply) and starts a dial. A
// failed dial keeps the queued messages and retries with the backoff; once
// nothing is queued (delivered or timed out) the peer goes back to idle
// instead of dialing again. A connection that carried no message either way
// for idle_timeout, with nothing queued, in flight, unconfirmed or held for
// a listener on either side, is closed by agreement (IdleClose records,
// protocol.h): while a request is open neither side starts a message, new
// ones are queued, and whatever was queued meanwhile dials again at once.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/log_limit.h"
#include "common/state_machine.h"
#include "common/status.h"
#include "config/config.h"
#include "daemon/loop/events.h"
#include "daemon/loop/service_queue.h"
#include "daemon/peer/confirmations.h"
#include "daemon/peer/connection.h"
#include "daemon/peer/control_outbox.h"
#include "daemon/peer/events.h"
#include "daemon/peer/idle_closer.h"
#include "daemon/peer/inbound.h"
#include "daemon/peer/outbound.h"
#include "daemon/peer/peer_state.h"
#include "daemon/peer/rail_probe.h"
#include "daemon/peer/rails.h"
#include "daemon/peer/redial.h"
#include "daemon/peer/resume.h"

namespace rdmamsg::peer {

struct PeerCounters {
  uint64_t messagesSent = 0;
  uint64_t messagesReceived = 0;
  uint64_t bytesSent = 0;
  uint64_t bytesReceived = 0;
  uint64_t connects = 0;
  uint64_t dials = 0;
  uint64_t heartbeatsSent = 0;
  uint64_t idleCloses = 0;  // connections closed by agreement for being idle
  // Times an established connection over one rail was lost and the peer
  // dialed over its next rail at once (RailRotation).
  uint64_t railFailovers = 0;
  // Times the session moved back to a rail before the one in use once that
  // rail was healthy again (rails.h), either end asking.
  uint64_t railFailbacks = 0;
  // Times a session went on over a new connection (resume.h), and the
  // messages sent again then.
  uint64_t sessionsResumed = 0;
  uint64_t messagesResent = 0;
  // Batches from the peer that failed verification (batch_auth.h), by
  // reason; each closed its connection.
  std::array<uint64_t, kBatchRejects> batchesRejected{};
};

// A peer's current connection, for the status (daemon/status.h).
struct LinkSnapshot {
  uint64_t remoteIncarnation = 0;
  bool established = false;
  bool authenticated = false;
  std::string secretFingerprint;  // of the secret it was proven with
  uint32_t credits = 0, allowance = 0, lent = 0;
  ConnCounters counters;
  // With session keys: "aes-256-gmac" or "aes-256-gcm", and their rotations.
  const char* batchProtection = nullptr;
  uint64_t keyRotations = 0;
  std::string device;                   // the RDMA device it runs over ("" before it has one)
  std::optional<uint8_t> trafficClass;  // its QP's path (Connection::trafficClass)
  std::string remoteAddress{};          // the peer's end: which of its rails it runs over
  std::optional<std::size_t> rail{};    // the index of that rail (config::Peer::rail)
};

// One of the peer's rails, for the status: its addresses (this node's,
// the peer's), state and health, and what went over it.
struct RailSnapshot {
  std::size_t index = 0;
  std::string local, remote;
  RailState state = RailState::kStandby;
  RailStats stats;         // traffic: its connections', the current one's included
  int64_t heldDownMs = 0;  // failback hold-down left (rails.h)
};

// A peer, for the status (daemon/status.h).
struct PeerSnapshot {
  std::string name, address, lastError;
  std::size_t lane = 0;             // rail_policy: spread: its lane (Peer::lane)
  std::vector<PeerSnapshot> lanes;  // lane 0 with spread: the other lanes
  PeerState state = PeerState::kIdle;
  size_t queuedBytes = 0, inFlight = 0;
  PeerCounters counters;
  uint64_t confirmed = 0, failed = 0;
  LatencyHistogram deliveryLatency;
  std::vector<OutFlowStats> flows;
  std::optional<LinkSnapshot> link;  // while it has a connection
  std::vector<RailSnapshot> rails;   // the rails it shares with this node
};

class Peer {
 public:
  // `handle` names this peer object and never another (Mesh::handleOf).
  // `lane`: with rail_policy spread, which of the peer's connections this
  // object keeps (one per shared rail; lane 0 is the one found by name).
  Peer(loop::EventLoop& loop, const config::Config& cfg, config::Peer peer, PeerEvents& events,
       loop::ServiceQueue::Waker wake, uint64_t handle, std::size_t lane = 0);
  ~Peer();
  Peer(const Peer&) = delete;
  Peer& operator=(const Peer&) = delete;

  const std::string& name() const { return cfg_.name; }
  // Lanes (rail_policy: spread, config.h): each is a Peer of its own, with
  // its own connection and session, preferring its own rail (rail i for
  // lane i) and failing over to the others like active-standby. Lane 0
  // carries the subjects and knows its siblings (Mesh links them); a flow
  // goes to one lane by its two services' names, so its order is kept.
  std::size_t lane() const { return lane_; }
  const std::string& label() const { return label_; }  // "beta", "beta lane 1"
  void setLanes(std::vector<Peer*> lanes) { lanes_ = std::move(lanes); }
  const std::vector<Peer*>& lanes() const { return lanes_; }
  Peer& laneFor(std::string_view srcService, std::string_view dstService);
  const config::Address& address() const { return cfg_.address; }
  const config::Peer& config() const { return cfg_; }
  // The rail the next dial takes (RailRotation), in the rails this node
  // shares with the peer (Config::railsWith).
  std::size_t rail() const { return rails_.current(); }
  uint64_t id() const { return id_; }
  uint64_t handle() const { return handle_; }
  PeerState state() const { return state_.get(); }
  bool established() const { return state_.get() == PeerState::kEstablished; }
  const std::string& lastError() const { return lastError_; }
  const PeerCounters& counters() const { return counters_; }
  const Connection* connection() const { return conn_; }
  PeerSnapshot snapshot() const;
  uint64_t epoch() const { return epoch_; }
  size_t queuedBytes() const { return out_.queuedBytes(); }
  size_t inFlight() const { return out_.inFlight(); }
  std::vector<OutFlowStats> flowStats() const { return out_.flowStats(); }
  uint64_t confirmedCount() const { return out_.confirmed(); }
  const LatencyHistogram& deliveryLatency() const { return out_.deliveryLatency(); }
  uint64_t failedCount() const { return out_.failed(); }
  uint64_t remoteIncarnation() const;
  // No connection, and the session waits for the next one (resume.h): a
  // dial says so (kHelloResuming).
  bool holdsSession() const { return resume_.held; }
  // Connections with the peer keep their session across connections
  // (kHelloResume): it has several rails with this node.
  bool resumes() const { return config_.railsWith(cfg_) > 1; }

  void start();  // begin dialing
  // A peer does not dial by itself: it asks, by marking itself, and the
  // mesh's service step takes the request (false: no dial is wanted now)
  // and hands it the connection it made (possibly down already, if it
  // failed at once).
  bool takeDialRequest();
  void dialed(Connection* c);
  // Stops dialing and closes the connection; its messages in flight fail
  // with `why`.
  void shutdown(const std::string& why = "daemon stopping");
  // Removed from the configuration (a reload): shut down for good, no longer
  // found by name, dialed, or listed; the mesh frees it once it is closed.
  void retire(const std::string& why);
  bool removed() const { return removed_; }
  // A reload gave it other addresses (rails): the connection (or the
  // attempt) is closed, and it dials the new first rail at once.
  void readdress(const config::Peer& now);
  // A mesh secret is configured now (a reload): a connection made without
  // one is closed, and the peer dials again at once.
  void requireAuthentication();
  // Dial now (e.g. the device is back), whatever the backoff says.
  void redialSoon();
  // The configuration's connect mode may have changed (a reload): with
  // always, an idle peer is dialed.
  void applyConnectMode();

  // Sends a message. Errors: peer_unreachable (connect: always and not
  // connected, or stopping), too_large. With connect: on_demand a message to
  // a peer that is not connected is queued and the peer dialed.
  // Admitted::holdOn tells the caller to hold the client's sends to this
  // destination until PeerEvents::queueDrained(key). `inPlace`: the
  // payload lies in a client's shared memory (Outbound::send).
  Result<Admitted> send(uint64_t session, uint64_t msgId, std::string_view srcService,
                        std::string_view dstService, std::span<const std::byte> payload,
                        const PayloadHandle* inPlace = nullptr);
  // The outcome of messages seq .. seq + count - 1, which the router
  // accepted: confirmed to the peer if connection `epoch` is still the
  // current one. With `consumedBytes` (messages listeners took) the
  // confirmation may wait a little to go with others — a reply usually
  // follows — until a quarter of a window or 128 messages are due, 1 ms has
  // passed, or something else is sent.
  void confirmLater(uint64_t epoch, uint64_t seq, uint64_t count, Errc errc,
                    size_t consumedBytes = 0);

  // Subjects (control_outbox.h). Whether the current connection carries
  // them (established, and the peer's Hello says it routes subjects).
  bool routesSubjects() const;
  // Announces a change of this node's interest on the current connection
  // (nothing when it does not route subjects: the next one starts from the
  // whole interest, PeerEvents::connectionUp).
  void announce(InterestOp op, std::string_view group, std::string_view pattern);
  // The result of the peer's publish `token`, owed on connection `epoch`.
  void sendPubResult(uint64_t epoch, uint64_t token, const PubResultBody& result);
  // Whether the flow to `service` could start a message of `cost` now (a
  // queue group member there has room).
  bool flowHasRoom(std::string_view service, uint64_t cost) const;

  // The mesh's tie-break for a CONNECT_REQUEST from this peer; kNone: accept.
  RejectReason admit(const Hello& hello, bool selfIsLower) const;
  // The accepted connection becomes current. With a mesh secret it is only a
  // candidate until it has authenticated: it closes, replaces or blocks
  // nothing before (observe() then settles duplicates and replacements), so
  // a connection that fails its proof never disturbs the peer's connection
  // or dials. At most kMaxCandidates are kept; a newer one evicts the oldest.
  // `hello` and `remoteAddress`: the connect request's (not yet known to `c`).
  void adopt(Connection* c, const Hello& hello, const std::string& remoteAddress);
  static constexpr size_t kMaxCandidates = 4;
  // The connection is this peer's, current or candidate (the mesh reaps the others).
  bool owns(const Connection* c) const {
    return conn_ == c || std::find(candidates_.begin(), candidates_.end(), c) != candidates_.end();
  }

  // Rails (peer_rails.cc, rails.h): a rail the peer wants probed, which the
  // mesh takes in its service step and starts (Mesh::probe), handing it
  // over; the peer reads its outcome and destroys it in its service step.
  std::optional<std::size_t> takeProbeRequest();
  void probing(std::unique_ptr<RailProbe> probe);
  const RailHealth& railHealth() const { return health_; }

  // The service step: observe the connection, read, write into batches.
  void service();
  // Posts what service() wrote (the mesh calls it after the loop turn's
  // other output, e.g. deliveries written to listeners, has gone out).
  void post();

 private:
  void setState(PeerState s);
  bool onDemand() const { return config_.connect == config::ConnectMode::kOnDemand; }
  std::chrono::milliseconds tickPeriod() const;
  // Nothing for this connection in either direction: nothing in flight or
  // unconfirmed (queued messages aside), no outcome to write, nothing held
  // for a listener, no message half received, no batch unread.
  bool quiet() const;
  // The idle-close agreement's steps (peer_idle_close.cc, IdleCloser).
  void idleTick(std::chrono::steady_clock::time_point now);
  void handleIdleClose();
  void writeIdleAnswers();
  // `resuming`: `c` is the peer's new connection of the session the old
  // one carried (kHelloResuming), whose loss this end had not seen; `over`:
  // the rail it runs over.
  void makeCurrent(Connection* c, const char* whyOldGoes, bool resuming = false,
                   std::optional<std::size_t> over = std::nullopt);
  // Whether a connection whose Hello is `remote` replaces the current one
  // to resume its session.
  bool resumesCurrent(const Hello& remote) const;
  void closeCandidates(const std::string& why, bool onlyUnauthenticating = false);
  void settleCandidates();
  void dial();          // asks the mesh for a connection
  bool readyToDial();   // idle or in backoff, and (on demand) something to send
  void dialOnDemand();  // a message is queued: dial unless a dial is under way
  void observe();
  void onUp();
  void onDown();
  void redialAfterDown(bool held, bool idleClosed, bool refused, bool wasEstablished);
  // The session (peer_resume.cc, resume.h): opened on a connection made,
  // held or ended when one is lost, and what the peer's kResume says.
  void openSession(const Hello& remote);
  void freshSession();
  bool holdSession(bool wasUp, const std::optional<RejectReason>& refusal, bool idleClosed);
  void endSession(const std::string& why);
  std::string heldTooLong() const;
  bool sessionResumes() const { return resume_.negotiated || resume_.held; }
  // How long a session is held after its connection was lost.
  std::chrono::milliseconds sessionHold() const {
    return std::max(config_.timers.connectTimeout, config_.timers.heartbeatTimeout);
  }
  bool onResume(const Record& r);
  void writeResume(ResumeKind kind);
  bool onResultsRead(const Record& r);
  void writeResultsRead();
  void resumeTick(std::chrono::steady_clock::time_point now);
  void countRejectedBatch(const Connection& c);
  // Rails (peer_rails.cc): each probe interval, the rails to probe and
  // whether to move back to a preferred one; probes done; a connection up
  // or down over a rail; a move asked by either end, and its dial.
  void railTick();
  void reapProbes();
  void railUp();
  void railDown(bool failed, const std::string& why);
  void railFailed(std::size_t rail, const std::string& why);
  void startMove(std::size_t to);
  void redialMoved();
  bool onMove(const Record& r);
  std::vector<RailSnapshot> railSnapshots() const;
  // The rail `c` runs over: the one of the peer's rails its remote end is on
  // (`remoteAddress`).
  std::optional<std::size_t> railOf(const Connection& c) const { return railOf(c.remoteAddress()); }
  std::optional<std::size_t> railOf(const std::string& remoteAddress) const;
  // An established connection (current or candidate) is gone: "closed" at
  // info when this peer closed it on purpose (stopping, or to dial again),
  // else "lost" at warning within its kind's bound.
  void logDown(const Connection& c, const std::string& why);
  void receive();
  bool readBatch(size_t i);
  bool onRecord(const Record& r);
  bool handleMessage(const Record& r);
  void confirm(uint64_t seq, Errc errc);  // an outcome due at once
  bool writeConfirms();
  void onTick();

  const config::Config& config_;
  config::Peer cfg_;
  PeerEvents& events_;
  loop::ServiceQueue::Waker wake_;
  uint64_t id_;
  uint64_t handle_;
  std::size_t lane_;
  std::string label_;
  std::vector<Peer*> lanes_;  // lane 0: every lane, itself first (Mesh::linkLanes)
  StateMachine<PeerState> state_{PeerState::kIdle};
  bool removed_ = false;

  Connection* conn_ = nullptr;           // current connection (owned by the mesh)
  std::vector<Connection*> candidates_;  // accepted, not yet proven (owned by the mesh)
  uint64_t epoch_ = 0;                   // counts established connections
  bool connUp_ = false;                  // conn_ reached established
  std::string lastError_ = "not connected yet";
  // Lines about its connections' failures, bounded per kind (a flapping
  // link, a refusing peer), so that one cause never hides another: a
  // connection closed for a batch that failed verification has its own.
  struct FailureLogs {
    LogLimit lost, rejected, batchRejected;
  } logs_;
  Redial redial_;       // when the next dial goes
  RailRotation rails_;  // over which rail
  RailHealth health_;   // how each rail fared
  std::vector<std::unique_ptr<RailProbe>> probes_;
  std::vector<std::size_t> probeAsks_;   // rails to probe, not yet taken by the mesh
  std::optional<std::size_t> connRail_;  // the rail the current connection runs over (up)
  // A move of the session to another rail (kMove), asked by either end: the
  // connection closes (by the peer, or here after `deadline`), the session
  // is held and rail `to` dialed (redialMoved); not a failure of the rail
  // left. The higher name waits for the peer's dial over `awaited` (and
  // dials nothing early meanwhile): a connection over another rail then
  // means that dial failed.
  struct Move {
    std::optional<std::size_t> to;
    std::chrono::steady_clock::time_point deadline;
    bool redial = false;  // onDown → redialAfterDown: dial `to`
    std::optional<std::size_t> awaited;
  } move_;
  std::unique_ptr<loop::Timer> tickTimer_, confirmTimer_;
  std::unique_ptr<loop::Timer> railTimer_;  // rail_probe_interval (peer_rails.cc)
  uint64_t railTicks_ = 0;                  // its expiries

  Outbound out_;
  Inbound in_{config_};     // reassembly of this connection's messages
  bool pumpAgain_ = false;  // the pump left a flow ready: serviced again after the post
  Confirmations confirms_;  // outcomes owed to the peer
  ResumeState resume_;      // the session across connections
  bool replacing_ = false;  // onDown: the connection lost is being replaced to resume
  // onDown: the connection is closed for another that takes its place (no
  // other rail to dial; a failure of its rail only if the peer's connection
  // runs over another one: replacementRail_).
  bool superseded_ = false;
  std::optional<std::size_t> replacementRail_;  // onDown, replaced: the rail of the new connection
  // Subjects on the current connection: records owed, and the interest
  // announced each way (a connection that carries interest is never idle).
  // While a session is held (resume.h) the peer's interest and the results
  // owed to it are kept: `lossOwed` until the session goes on (nothing to
  // report) or ends (PeerEvents::connectionLost then).
  struct Subjects {
    ControlOutbox outbox;
    int64_t announced = 0, heard = 0;
    bool routed = false;  // the connection up carries subjects
    bool lossOwed = false;
  } subjects_;

  // Connect on demand: the current connection's idle-close agreement.
  IdleCloser idle_{"peer " + cfg_.name + ": idle close"};
  uint64_t awaitingConsume_ = 0;  // messages of this epoch held for listeners

  PeerCounters counters_;
};

}  // namespace rdmamsg::peer
