// LocalServer: accepts application connections on the daemon's Unix socket
// and runs one Session per client on the caller's EventLoop.
//
// Requests are decoded and validated here and handed to a LocalHandler (the
// router); the router answers through the methods below. Calls go one way:
//  - sessions only mark themselves; their input is parsed and dispatched to
//    the handler in the loop turn's service phase (loop/turn.h);
//  - the router's calls (deliver, ack, fail, hold, …) only queue output or
//    change a session's flow control: they never call back into the router;
//  - what the router is told besides requests — deliveries taken or lost
//    (the consumed callback), listeners that caught up (the drained
//    callback) — is collected and handed over in the report phase, and a
//    closed session in the reap phase (onSessionClosed).
// Output is written once per loop turn (the flush phase). Methods taking a
// SessionId are no-ops (returning false) for sessions that are closing or
// gone, so the router may call them after a session died and before it
// heard onSessionClosed.
//
// Backpressure:
//  - pauseReading/resumeReading: the router stops consuming a client's
//    requests (e.g. its destination peer has no credits and a full queue).
//  - hold/resume: the router tells a client to send nothing more to one
//    destination (HOLD), and later that it may again (RESUME).
//  - Listeners: a session whose deliveries not yet taken by its application
//    (or whose pending output) reach outputHighWatermark is "congested"; when
//    they drop below outputLowWatermark the drained callback fires, so the
//    router can resume the senders it held. A session
//    whose own output exceeds outputReadStop stops being read until its
//    output drains below the low watermark (a client that never reads its
//    acks cannot grow the daemon's memory without bound).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/local_protocol.h"
#include "common/log_limit.h"
#include "config/local_policy.h"
#include "daemon/delivery_room.h"
#include "daemon/external_payload.h"
#include "daemon/local/local_handler.h"
#include "daemon/local/reports.h"
#include "daemon/local/unix_listener.h"
#include "daemon/loop/event_loop.h"
#include "daemon/loop/events.h"

namespace rdmamsg::local {

class Session;

struct LocalServerConfig {
  ListenerConfig listener;
  std::string nodeName;                   // sent in WELCOME
  uint32_t maxMessageSize = 1u << 20;     // payload limit, sent in WELCOME
  size_t outputHighWatermark = 4u << 20;  // bytes
  size_t outputLowWatermark = 1u << 20;   // bytes
  size_t outputReadStop = 16u << 20;      // bytes; at least two maximum-size frames
  // A client that has not said HELLO by then is disconnected (an idle or
  // foreign connection does not hold a descriptor forever).
  std::chrono::milliseconds helloTimeout{5000};
  // Who may connect, register and send (config/local_policy.h); unset: anyone
  // who can open the socket may do anything. Replaced by setPolicy().
  std::optional<config::LocalPolicy> policy;
  // Whether clients may move their frames to shared-memory rings (SHM_OFFER);
  // replaced by setSharedMemory().
  bool sharedMemory = true;
};

// Requests refused by the local policy, by kind, and sessions closed because
// a new policy took away what they held.
struct PolicyCounters {
  uint64_t connect = 0;
  uint64_t reg = 0;
  uint64_t send = 0;
  uint64_t publish = 0;
  uint64_t subscribe = 0;
  uint64_t revokedSessions = 0;
};

class LocalServer {
 public:
  using DrainedCallback = Reports::DrainedCallback;

  // Opens the listening socket (throws std::runtime_error at startup).
  LocalServer(loop::EventLoop& loop, LocalServerConfig config, LocalHandler& handler);
  // Closes every session without calling the handler.
  ~LocalServer();
  LocalServer(const LocalServer&) = delete;
  LocalServer& operator=(const LocalServer&) = delete;

  const LocalServerConfig& config() const { return config_; }
  const std::string& socketPath() const { return listener_.path(); }

  // --- answers to the router's requests -----------------------------------
  // Queues a DELIVER of a message for `toService` (a service the session
  // registered). The payload is copied. The consumed callback gets the
  // receipt back once the client says its application has taken the message
  // (CONSUMED: ok), or when the session closes before that (unknown_service).
  // `room`: where the payload was put together (a DeliveryBlock from
  // reserveDelivery(): only the frame's head is written then). False, as
  // for a session gone, when the room is another session's: the listener
  // changed while the message came.
  bool deliver(SessionId id, std::string_view srcNode, std::string_view srcService,
               std::string_view toService, std::span<const std::byte> payload,
               const Receipt& receipt, DeliveryRoom* room = nullptr);
  // Room for the payload of a message to session `id` that comes in
  // fragments, reserved at the first: a block of its delivery area (null
  // when it has none, or no room now). deliver() it with the room.
  std::unique_ptr<DeliveryRoom> reserveDelivery(SessionId id, std::string_view srcNode,
                                                std::string_view srcService,
                                                std::string_view toService, uint64_t payload);
  // Subjects (local_server_pubsub.cc). A MSG of a publish for subscription
  // `subId` of session `id`, and a REPLY to its request `requestId`: copied
  // and tracked like deliver()'s messages (the consumed callback gets the
  // receipt back once taken, or lost).
  bool deliverMsg(SessionId id, uint64_t subId, std::string_view srcNode, std::string_view subject,
                  std::string_view replyTo, std::span<const std::byte> payload,
                  const Receipt& receipt);
  bool deliverReply(SessionId id, uint64_t requestId, std::string_view srcNode,
                    std::span<const std::byte> payload, const Receipt& receipt);
  // The outcome of a publish (or of a request that got no reply).
  bool pubAck(SessionId id, uint64_t msgId, const proto::PubOutcome& outcome,
              std::string_view text = {});
  // Confirms msgId delivered to a listener. Acks are batched: all acks queued
  // in one loop turn go out in one ACK frame.
  bool ack(SessionId id, uint64_t msgId, uint64_t count = 1);  // ids msgId .. msgId + count - 1
  // Reports msgId failed; `why.message()` should name the node/service at fault.
  bool fail(SessionId id, uint64_t msgId, const Status& why);

  // --- flow control --------------------------------------------------------
  // HOLD / RESUME of one destination for one client.
  bool hold(SessionId id, std::string_view node, std::string_view service);
  bool resume(SessionId id, std::string_view node, std::string_view service);
  bool pauseReading(SessionId id);
  bool resumeReading(SessionId id);
  size_t outputBytes(SessionId id) const;  // 0 for unknown sessions
  // What a client may have written before it could read a HOLD: its
  // library's buffer (librdmamsg's send() waits above 4 MiB), its socket's
  // or its ring's, and what the daemon reads in one go.
  size_t holdSlack(SessionId id) const;
  bool outputCongested(SessionId id) const;
  void setDrainedCallback(DrainedCallback cb) { reports_.onDrained(std::move(cb)); }
  // A delivery of `bytes` to session `listener` was taken by its application
  // (ok) or lost with its session (unknown_service).
  using ConsumedCallback = Reports::ConsumedCallback;
  void setConsumedCallback(ConsumedCallback cb) { reports_.onConsumed(std::move(cb)); }
  // Bytes of deliveries not yet taken by the applications, all sessions.
  size_t trackedBytes() const { return trackedBytes_; }

  // --- local policy ----------------------------------------------------------
  // Replaces the policy (a reload): new requests are checked against it, and
  // every session is checked again: one whose user may no longer connect, or
  // which holds a service its user may no longer register, is closed with a
  // permission_denied error naming the rule. Returns how many were closed.
  size_t setPolicy(std::optional<config::LocalPolicy> policy);
  const PolicyCounters& policyCounters() const { return policyCounters_; }
  // Whether SHM_OFFERs are accepted from now on (a reload); clients already
  // on shared memory keep it.
  void setSharedMemory(bool on) { config_.sharedMemory = on; }

  // --- sessions --------------------------------------------------------------
  // Sends ERROR(reason) if not ok, flushes what the socket takes, closes.
  bool closeSession(SessionId id, const Status& reason = Status());
  // Closes every session with `reason` (e.g. shutting_down at daemon stop).
  void closeAll(const Status& reason);
  const PeerCred* peerCred(SessionId id) const;
  std::vector<SessionId> sessionIds() const;
  size_t sessionCount() const { return clients_.size(); }

 private:
  // What the server keeps of each session beside the session itself.
  struct Client {
    std::unique_ptr<Session> session;
    bool congested = false;       // deliveries not taken or output above the high watermark
    bool dirty = false;           // queued for the flush
    bool marked = false;          // queued for the service phase
    bool knownToHandler = false;  // the handler has seen it (onSessionClosed owed)
    // Set when the local policy refuses this client: the answer to its
    // next frame (HELLO), after which the session closes.
    Status refusal;
    // The last destination the local policy allowed it, under policy
    // generation `policyGeneration` (maySend).
    uint64_t policyGeneration = 0;
    std::string policyNode, policyService;
  };

  void acceptAll();
  void addSession(UniqueFd fd);
  Client* find(SessionId id) const;  // nullptr when unknown or closing
  // Frames and events of one session (its service phase).
  void markDirty(Client& c);
  // `inPlace`: a SEND's payload held where it lies in the client's shared
  // memory (a frame record), for the handler to share if it keeps it.
  void handleFrame(Client& c, const proto::Frame& frame, const PayloadHandle* inPlace = nullptr);
  void protocolError(Client& c, const char* reason);
  void protocolError(Client& c, const Status& why);
  bool handleFrameRecord(Client& c);  // false: the session is closing
  void versionMismatch(Client& c, uint8_t version);
  void helloTimedOut(Client& c);
  void beginClose(Client& c, const Status& reason, std::string_view logWhy);
  // Request handlers.
  void onHello(Client& c, const proto::Frame& frame);
  void onShmOffer(Client& c, const proto::Frame& frame);
  void onRegister(Client& c, std::string_view service);
  void onUnregister(Client& c, std::string_view service);
  void onSend(Client& c, const proto::Frame& frame, const PayloadHandle* inPlace);
  void onStatusRequest(Client& c);
  void onConsumed(Client& c, uint64_t taken);
  void onSub(Client& c, const proto::Frame& frame);
  void onUnsub(Client& c, uint64_t subId);
  void onPub(Client& c, const proto::Frame& frame);
  void onRespond(Client& c, const proto::Frame& frame);
  // The tail of every delivery: tracked until the application took it.
  void tracked(Client& c, const Receipt& receipt, size_t frameBytes);
  // Policy checks: log, count and answer a refusal (the caller stops).
  bool mayRegister(Client& c, std::string_view service);
  bool maySend(Client& c, const proto::Frame& frame);
  // Publish and subscribe (local_server_pubsub.cc): the refusal, or ok.
  Status mayPublish(Client& c, std::string_view subject);
  Status maySubscribe(Client& c, std::string_view pattern);
  // What the local policy refused: indexes policyLog_, names log lines.
  enum class PolicyAction : uint8_t { connect, reg, send, publish, subscribe };
  static constexpr size_t kPolicyActions = 5;
  void refused(Session& s, PolicyAction action, const config::Verdict& v);
  // The turn's phases.
  void mark(SessionId id);
  void serviceSessions();
  void serviceSession(Client& c);
  void processInput(Client& c);
  void flushDirty();
  void afterFlush(Client& c);
  void settleReceipts(Client& c);  // hands back the receipts of consumed frames
  // Congested at outputHighWatermark of deliveries not taken or output not
  // written; drained (the callback) below outputLowWatermark of both.
  void updateCongestion(Client& c);
  void reap();

  loop::EventLoop& loop_;
  LocalServerConfig config_;
  LocalHandler& handler_;
  UnixListener listener_;
  SessionId nextId_ = 1;
  std::unordered_map<SessionId, Client> clients_;
  // find()'s memory of the last session found (acks and deliveries of a
  // stream go to the same session); cleared when a session is removed.
  mutable Client* lastFound_ = nullptr;
  std::vector<SessionId> dirty_;
  std::vector<SessionId> flushing_;  // dirty_ being flushed (reused storage)
  std::vector<Client> graveyard_;    // closed, freed by reaper_
  std::vector<SessionId> marked_, servicing_;
  size_t trackedBytes_ = 0;
  uint64_t policyGeneration_ = 1;  // +1 at every setPolicy (sessions cache allowed sends)
  PolicyCounters policyCounters_;
  LogLimit policyLog_[kPolicyActions];  // refusals, by PolicyAction
  // Polls the shared-memory sessions' rings while the loop spins (loop/spin.h);
  // made with the first such session.
  std::unique_ptr<loop::Spinner> spinner_;
  bool pollRings();
  bool armRings();
  void disarmRings();
  // Declared last: destroyed first, so no callback runs on a half-destroyed server.
  loop::Timer acceptRetry_;
  LogLimit acceptLog_;  // repeated failures: bounded lines
  loop::PhaseTask service_;
  Reports reports_;  // receipts taken or lost, listeners drained: told in the report phase
  loop::PhaseTask flush_;
  loop::PhaseTask reaper_;
  loop::IoEvent acceptEvent_;
};

}  // namespace rdmamsg::local
