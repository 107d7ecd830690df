// One RDMA connection to a peer daemon, its transport: the rdma_cm id and
// RC queue pair (owned by RAII handles), the CM events, the completions
// (dispatched by wr_id), teardown and the state machine. What travels on
// it is kept by the classes it owns, which never call back into it:
// - Sender (sender.h): the batches it fills, seals and posts, and the send
//   buffers they hold (SendBatches, send_batches.h: which sends are
//   signaled);
// - Receiver (receiver.h): the batches that arrived, read and reposted, on
//   a ReceiveSupply (receive_supply.h): the device's shared receive queue
//   or a receive set on its own QP;
// - CreditLedger (credit_ledger.h), which both use: the credits both ways,
//   the reserved credit, lending and release, the credit-only batch;
// - Authenticator (authenticator.h): the mesh-secret handshake;
// - BatchAuth (batch_auth.h): the session keys the handshake yields, which
//   the sender seals every batch with and the receiver verifies every
//   batch with before it is taken. A batch that fails closes the
//   connection (batchRejected() says why), and the peer dials again.
//
// Active side:  idle → resolving-address → resolving-route → connecting → established
// Passive side: idle → accepting → established
// Both:         established → disconnecting → closed
// With a mesh secret, connecting and accepting go through authenticating
// (the proofs of auth.h, the first batch each way) before established; a
// connection that is not established carries no messages.
//
// Calls go one way. The loop feeds a connection its CM events and
// completions; the connection updates its state and marks its owner's key
// on the service queue (loop/service_queue.h) — it never calls up. The
// owner (Peer) reads what the connection exposes in its service step: the
// state, the received batches ready to read, the room to send, and posts.
//
// Receive buffers are posted before rdma_connect / rdma_accept. Every send
// fills one of the peer's receive buffers with a batch (protocol.h), so a
// send needs a credit; credits come back in batch headers. Send buffers
// come from the device's shared pool, at most send_buffers / 2 (and
// buffer_count) per connection; a connection holds one from when it opens
// a batch until the send's completion.
//
// Teardown follows the seeds: rdma_disconnect (the QP goes to error and
// flushes), wait for DISCONNECTED and for every posted work request to come
// back (bounded) — on a shared receive queue also for
// IBV_EVENT_QP_LAST_WQE_REACHED — then the state is closed and the owner
// destroys the connection in its next service step, outside the
// connection's own callbacks: QP, buffers back to the device, id.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/state_machine.h"
#include "config/secret.h"
#include "daemon/loop/events.h"
#include "daemon/loop/service_queue.h"
#include "daemon/peer/authenticator.h"
#include "daemon/peer/conn_state.h"
#include "daemon/peer/credit_ledger.h"
#include "daemon/peer/protocol.h"
#include "daemon/peer/receiver.h"
#include "daemon/peer/send_room.h"
#include "daemon/peer/sender.h"
#include "daemon/rdma/cm_events.h"
#include "daemon/rdma/device.h"

namespace rdmamsg::peer {

struct ConnParams {
  size_t bufferSize = 64 * 1024;  // this end's receive buffers (the device's)
  uint32_t maxCredits = 64;       // buffer_count: the most buffers the peer may fill
  uint32_t sendBuffers = 32;      // the most send buffers this connection holds
  // After this long without a batch for messages, the next batch gives a
  // peer with shared receive buffers back what it lent (heartbeat_interval).
  std::chrono::milliseconds releaseAfter{1000};
  std::chrono::milliseconds connectTimeout{5000};
  Hello hello;  // what this daemon says about itself
  // The mesh secrets this node proves and accepts, current first (empty:
  // it does not authenticate), and its own name for the proofs.
  std::vector<config::Secret> secrets;
  std::string selfName;
  bool encrypt = false;  // encryption: on (kHelloEncrypts; both ends agree)
  // `tos`: set on a dialed id before its address is resolved (unset: the
  // device's default). An accepted connection has the listener's.
  std::optional<uint8_t> tos;
};

// The sender's and receiver's counters, and the ledger's.
struct ConnCounters : Sender::Counters, Receiver::Counters {
  uint64_t creditsLent = 0;      // receive buffers lent to the peer beyond the initial grant
  uint64_t creditsReleased = 0;  // credits the peer gave back when idle
};

class Connection final : public rdma::CmHandler, public rdma::CompletionSink, public SendRoom {
 public:
  Connection(loop::EventLoop& loop, const ConnParams& params, std::string name,
             loop::ServiceQueue::Waker wake);
  ~Connection() override;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Active: resolves `dst` and connects. A failure that happens at once
  // leaves the connection disconnecting or closed, like any other failure.
  // Once the route is resolved it asks for the device of its id's context
  // (wantsDevice) and waits, in resolving-route, for the owner's service
  // step to hand it over (useDevice).
  void startActive(rdma_event_channel* channel, const sockaddr* src, const sockaddr* dst);
  ibv_context* wantsDevice() const { return deviceWanted_ && !down() ? id_->verbs : nullptr; }
  // The device asked for (nullptr: none can be had, the connection fails):
  // creates the QP, posts the receives and connects.
  void useDevice(rdma::Device* device);
  // Passive: adopts an id from a CONNECT_REQUEST and accepts it, on the
  // device of the id's context (nullptr: none can be had, it fails).
  void accept(rdma_cm_id* id, const Hello& remote, rdma::Device* device);
  // Orderly teardown (idempotent).
  void close(const std::string& why);
  // The device is gone: no flushed completions will come; closed at once.
  void abandon(const std::string& why);
  // The device is about to be destroyed: the QP and buffers go now (before
  // the device's resources), the id stays until the connection is destroyed.
  void releaseVerbs(const std::string& why);

  // Loop inputs.
  void onCmEvent(const rdma::CmEvent& e) override;
  void onCompletion(const ibv_wc& wc) override;
  void onQpEvent(ibv_event_type type) override;

  // --- state
  ConnState state() const { return state_.get(); }
  bool established() const { return state_.get() == ConnState::kEstablished; }
  // It was established at some point (its Peer may not have seen it yet).
  bool wasEstablished() const { return wasEstablished_; }
  bool down() const {
    return state_.get() == ConnState::kDisconnecting || state_.get() == ConnState::kClosed;
  }
  bool reapable() const { return state_.get() == ConnState::kClosed; }
  bool active() const { return active_; }
  const std::string& name() const { return name_; }
  const std::optional<Hello>& remote() const { return remote_; }
  const std::string& closeReason() const { return closeReason_; }
  // Where the peer's end of the connection is (address:port), for logs.
  const std::string& remoteAddress() const { return remoteAddress_; }
  // Established after both proofs were checked; which secret matched
  // (0: the current one, 1: the previous one).
  bool authenticated() const { return auth_.authenticated(); }
  // It was made with a mesh secret (it authenticates, or fails).
  bool authenticates() const { return auth_.required(); }
  size_t secretIndex() const { return auth_.secretIndex(); }
  // The fingerprint of the secret it was proven with (authenticated only).
  std::string secretFingerprint() const { return auth_.fingerprint(); }
  // Why authentication failed, if it did (the connection is then down).
  const Status& authFailure() const { return auth_.failure(); }
  // Why a batch from the peer was rejected, if one was (it then closed).
  std::optional<BatchReject> batchRejected() const { return receiver_.rejected(); }
  // What protects its batches: nullptr before session keys (or without a
  // secret), "aes-256-gmac" or "aes-256-gcm".
  const char* batchProtection() const {
    return batchAuth_.active() ? toString(batchAuth_.protection()) : nullptr;
  }
  // Key epochs its session keys moved to, both ways.
  uint64_t keyRotations() const { return batchAuth_.rotations(); }
  // Why the peer refused the connection, if it did (kNone: nobody listened).
  std::optional<RejectReason> rejectReason() const { return rejected_; }
  rdma::Device* device() const { return device_; }
  // The traffic class its queue pair's path carries (the GRH's, on RoCE the
  // packets' ToS byte), as the device reports it; nullopt without a QP.
  std::optional<uint8_t> trafficClass() const;
  ConnCounters counters() const;
  uint32_t credits() const { return ledger_.credits(); }
  // Receive buffers the peer may fill (its credits, those in flight, and
  // batches not yet reposted), and how many of them were lent.
  uint32_t allowance() const { return ledger_.allowance(); }
  uint32_t lent() const { return ledger_.lent(); }
  std::chrono::steady_clock::time_point lastSent() const { return lastSent_; }
  std::chrono::steady_clock::time_point lastReceived() const { return lastReceived_; }

  // --- receiving: batches in arrival order, headers already checked.
  bool hasBatch() const { return receiver_.hasBatch(); }
  size_t pendingBatches() const { return receiver_.pending(); }
  std::span<const std::byte> batchAt(size_t i) const { return receiver_.batchAt(i); }
  std::span<const std::byte> frontBatch() const { return batchAt(0); }
  // Batch i is read (normally the front; a batch without messages may be
  // read out of order): its buffer is reposted at the next post().
  void consumeBatch(size_t i = 0) { receiver_.consume(i); }

  // --- sending: fill the open batch, then post() once per service step.
  // Bytes a message record may use now (0: no buffer or credit for data).
  size_t messageRoom() override;
  // Opens a batch if needed; false when no send buffer or credit is available.
  bool openBatch(bool dataRecord);
  BatchWriter& batch() override { return sender_.batch(); }
  bool hasOpenBatch() const { return sender_.hasOpen(); }
  // The open batch is full: queue it for posting (a batch that could not
  // be sealed fails the connection at the next post()).
  void sealBatch() override { noteSealed(sender_.seal()); }
  bool canPostInPlace(ExternalArea& area) override;
  void sealInPlace(const PayloadHandle& payload, std::span<const std::byte> bytes) override;
  // Reposts consumed receive buffers, adds a credit-only batch when enough
  // credits are owed, and posts every sealed batch and the open one.
  void post();

 private:
  void setState(ConnState s);
  bool createQp(rdma_cm_id* id, rdma::Device* device);
  void destroyQp();
  bool postReceives(bool initial = false);
  void giveBackBuffers();
  void onConnectTimeout();
  void onFlushTimeout();
  void onRouteResolved();
  void onRejected(const rdma::CmEvent& e);
  void onCmError(const rdma::CmEvent& e);
  void onDisconnected();
  void onHandshakeDone(const rdma::CmEvent& e);
  void startAuthentication(const rdma::CmEvent& e);
  bool bindAuthentication();
  void startSession();
  void processAuth();
  void onAuthStep(const Result<Authenticator::Step>& result);
  void sendAuth(const AuthBody& body);
  void authFail(const std::string& why);
  void becomeEstablished();
  void onBeacon();
  void onFailedCompletion(const ibv_wc& wc, uint32_t idx, bool isSend, bool isRecv);
  void onSendDone(uint32_t index);
  void onReceived(const ibv_wc& wc);
  void maybeFinishClose();
  Status postBeacon();
  void fail(const std::string& why);
  void postSends();
  // Keeps the first failure to seal a batch: post() fails the connection
  // with it (the writers that seal are in the middle of their records).
  void noteSealed(Status st) {
    if (!st.ok() && sealFailure_.ok()) sealFailure_ = std::move(st);
  }

  ConnParams params_;
  std::string name_;
  loop::ServiceQueue::Waker wake_;
  bool active_ = false;
  StateMachine<ConnState> state_{ConnState::kIdle};
  std::optional<Hello> remote_;
  std::optional<RejectReason> rejected_;
  std::string closeReason_;
  Status sealFailure_;  // a batch that could not be sealed: nothing more is posted
  std::string remoteAddress_;
  Authenticator auth_;
  BatchAuth batchAuth_;
  CreditLedger ledger_;

  // Declared parents first: the QP goes before the buffers (the sender's
  // and receiver's) and the id.
  rdma::CmIdPtr id_;
  rdma::Device* device_ = nullptr;
  Sender sender_;
  Receiver receiver_;
  rdma::CmQpPtr qp_;           // holds id_.get(); destroys its QP
  bool disconnected_ = false;  // DISCONNECTED seen (or never connected)
  bool beaconPosted_ = false;
  bool wasEstablished_ = false;
  bool deviceWanted_ = false;  // route resolved: waiting for useDevice()

  std::chrono::steady_clock::time_point lastSent_, lastReceived_;
  std::unique_ptr<loop::Timer> connectTimer_, closeTimer_;
};

}  // namespace rdmamsg::peer
