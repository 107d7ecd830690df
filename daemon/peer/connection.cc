// One RDMA connection to a peer daemon (connection.h).
#include "daemon/peer/connection.h"
#include "common/sys_error.h"
#include "config/address.h"
#include "daemon/logging.h"

#include <spdlog/spdlog.h>

#include <openssl/crypto.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>

namespace rdmamsg::peer {

namespace {

constexpr uint64_t kBeaconTag = 3ULL << 32;
constexpr auto kFlushWait = std::chrono::seconds(2);

}  // namespace

Connection::Connection(loop::EventLoop& loop, const ConnParams& params, std::string name,
                       loop::ServiceQueue::Waker wake)
    : params_(params),
      name_(std::move(name)),
      wake_(wake),
      auth_(params.secrets, params.selfName, name_, params.hello.incarnation),
      ledger_(params.maxCredits, params.releaseAfter, std::chrono::steady_clock::now()),
      sender_(ledger_, wake),
      receiver_(ledger_),
      connectTimer_(std::make_unique<loop::Timer>(loop, [this] { onConnectTimeout(); })),
      closeTimer_(std::make_unique<loop::Timer>(loop, [this] { onFlushTimeout(); })) {
  lastSent_ = lastReceived_ = std::chrono::steady_clock::now();
  if (auth_.required()) {
    sender_.authenticate(&batchAuth_);
    receiver_.authenticate(&batchAuth_);
  }
}

Connection::~Connection() {
  destroyQp();
  // The QP is gone, so no work request refers to the buffers any more: they
  // serve the next connection on this device.
  giveBackBuffers();
}

// The QP's completions and events go nowhere from now on; then it goes.
void Connection::destroyQp() {
  if (!qp_) return;
  device_->detach(id_->qp->qp_num);
  qp_.reset();
}

void Connection::giveBackBuffers() {
  if (device_ == nullptr) return;
  sender_.giveBack();
  receiver_.giveBack();
}

void Connection::releaseVerbs(const std::string& why) {
  abandon(why);
  destroyQp();
  // The device's pools go with it: nothing to give back.
  receiver_.detach();
  sender_.detach();
  device_ = nullptr;
}

std::optional<uint8_t> Connection::trafficClass() const {
  if (!qp_) return std::nullopt;
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  if (ibv_query_qp(id_->qp, &attr, IBV_QP_AV, &init) != 0) return std::nullopt;
  return attr.ah_attr.grh.traffic_class;
}

ConnCounters Connection::counters() const {
  return {sender_.counters(), receiver_.counters(), ledger_.lentTotal(), ledger_.releasedTotal()};
}

// The one place a connection changes state (StateMachine: every edge is
// checked and reported), and the owner is marked for its service step.
void Connection::setState(ConnState s) {
  if (s == ConnState::kEstablished) wasEstablished_ = true;
  if (state_.set(s, "peer " + name_ + ": connection")) wake_();
}

void Connection::onConnectTimeout() {
  std::string limit = std::to_string(params_.connectTimeout.count()) + " ms";
  if (state_.get() == ConnState::kAuthenticating)
    authFail("the peer's proof did not come within " + limit);
  else
    fail("connection not established within " + limit);
}

void Connection::onFlushTimeout() {
  spdlog::warn("peer {}: flushed work requests did not all return; closing anyway", name_);
  sender_.forgetOutstanding();
  receiver_.forgetPosted();
  disconnected_ = true;
  maybeFinishClose();
}

void Connection::startActive(rdma_event_channel* channel, const sockaddr* src,
                             const sockaddr* dst) {
  active_ = true;
  rdma_cm_id* raw = nullptr;
  if (rdma_create_id(channel, &raw, static_cast<rdma::CmHandler*>(this), RDMA_PS_TCP) != 0)
    return fail("rdma_create_id: " + errnoText(errno));
  id_.reset(raw);
  remoteAddress_ = config::Address::textOf(dst);
  connectTimer_->arm(params_.connectTimeout);
  setState(ConnState::kResolvingAddress);
  // Before resolving: the route, and so the path's traffic class, comes from it.
  if (params_.tos) {
    if (Status st = rdma::setTos(id_.get(), *params_.tos); !st.ok()) return fail(st.message());
  }
  if (rdma_resolve_addr(id_.get(), const_cast<sockaddr*>(src), const_cast<sockaddr*>(dst), 2000) !=
      0)
    fail("rdma_resolve_addr: " + errnoText(errno));
}

void Connection::accept(rdma_cm_id* id, const Hello& remote, rdma::Device* device) {
  id_.reset(id);
  id_->context = static_cast<rdma::CmHandler*>(this);
  remote_ = remote;
  ledger_.knowPeer(remote);
  remoteAddress_ = config::Address::textOf(rdma_get_peer_addr(id_.get()));
  connectTimer_->arm(params_.connectTimeout);
  setState(ConnState::kAccepting);
  if (!createQp(id_.get(), device)) return;
  rdma_conn_param p{};
  AcceptData data{};
  data.hello = params_.hello;
  p.private_data = &data.hello;
  p.private_data_len = sizeof(Hello);
  if (auth_.required()) {
    const Status nonce = auth_.startAcceptor(remote, data.nonce).status();
    if (!nonce.ok()) return fail(nonce.message());
    p.private_data = &data;
    p.private_data_len = sizeof data;
  }
  p.responder_resources = 0;
  p.initiator_depth = 0;
  p.rnr_retry_count = 7;
  if (rdma_accept(id_.get(), &p) != 0) fail("rdma_accept: " + errnoText(errno));
}

bool Connection::createQp(rdma_cm_id* id, rdma::Device* device) {
  device_ = device;
  if (device_ == nullptr) {
    fail("no RDMA device resources");
    return false;
  }
  if (Status st = receiver_.open(*device_, params_.maxCredits); !st.ok()) {
    fail("receive buffers: " + st.message());
    return false;
  }
  params_.bufferSize = device_->pools().bufferSize;
  ibv_qp_init_attr a{};
  a.send_cq = device_->cq();
  a.recv_cq = device_->cq();
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = params_.sendBuffers + 1;  // + the teardown beacon
  a.cap.max_send_sge = 2;                       // a batch's head, and a payload posted in place
  receiver_.describe(a);
  a.sq_sig_all = 0;
  if (rdma_create_qp(id, device_->pd(), &a) != 0) {
    fail("rdma_create_qp: " + errnoText(errno));
    return false;
  }
  qp_.reset(id);
  device_->attach(id->qp->qp_num, this);
  // Use what the device granted (it may round up, never below what was asked).
  sender_.attach(device_->sendPool(), std::min(params_.sendBuffers, a.cap.max_send_wr - 1));
  receiver_.start(a.cap, params_.hello);
  // Receive buffers are in place before the connection is requested or accepted.
  return postReceives(/*initial=*/true);
}

bool Connection::postReceives(bool initial) {
  if (Status st = receiver_.post(id_->qp, initial); !st.ok()) {
    fail(st.message());
    return false;
  }
  return true;
}

void Connection::onCmEvent(const rdma::CmEvent& e) {
  if (state_.get() == ConnState::kClosed) return;
  if (state_.get() == ConnState::kDisconnecting) {
    switch (e.type) {
      case RDMA_CM_EVENT_ESTABLISHED:
        // Closed while the handshake was under way (a connect timeout, a
        // reload): the peer completed it meanwhile. Tell it the connection
        // is over; the QP is already flushed.
        rdma_disconnect(id_.get());
        return;
      case RDMA_CM_EVENT_ADDR_RESOLVED:
      case RDMA_CM_EVENT_ROUTE_RESOLVED:
        return;  // a dial closed before it got this far: go no further
      default:
        break;
    }
  }
  switch (e.type) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      setState(ConnState::kResolvingRoute);
      if (rdma_resolve_route(id_.get(), 2000) != 0) fail("rdma_resolve_route: " + errnoText(errno));
      return;
    case RDMA_CM_EVENT_ROUTE_RESOLVED:
      return onRouteResolved();
    case RDMA_CM_EVENT_ESTABLISHED:
      return onHandshakeDone(e);
    case RDMA_CM_EVENT_REJECTED:
      return onRejected(e);
    case RDMA_CM_EVENT_ADDR_ERROR:
    case RDMA_CM_EVENT_ROUTE_ERROR:
    case RDMA_CM_EVENT_UNREACHABLE:
    case RDMA_CM_EVENT_CONNECT_ERROR:
      return onCmError(e);
    case RDMA_CM_EVENT_DISCONNECTED:
      return onDisconnected();
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
      // The id must be destroyed: nothing more will complete on this device.
      if (device_ != nullptr) device_->markFailed();
      return abandon("RDMA device removed");
    case RDMA_CM_EVENT_ADDR_CHANGE:
      // The device under its address changed: closed, and dialed again over
      // what holds the address now.
      return close("the local address's device changed (ADDR_CHANGE)");
    default:
      return;  // TIMEWAIT_EXIT, ...: nothing to do
  }
}

// The route is resolved: the QP needs the device of the id's context, which
// the owner's service step provides (useDevice).
void Connection::onRouteResolved() {
  deviceWanted_ = true;
  wake_();
}

void Connection::useDevice(rdma::Device* device) {
  deviceWanted_ = false;
  if (!createQp(id_.get(), device)) return;
  rdma_conn_param p{};
  p.private_data = &params_.hello;
  p.private_data_len = sizeof(Hello);
  p.retry_count = 7;
  p.rnr_retry_count = 7;
  setState(ConnState::kConnecting);
  if (rdma_connect(id_.get(), &p) != 0) fail("rdma_connect: " + errnoText(errno));
}

void Connection::onRejected(const rdma::CmEvent& e) {
  const Result<Hello> h = decodeHello(e.privateData.data(), e.privateData.size());
  rejected_ = h ? h->reason : RejectReason::kNone;
  disconnected_ = true;
  fail(h ? std::string("rejected by peer: ") + toString(h->reason)
         : "rejected (status " + std::to_string(e.status) + ", nobody listening?)");
  maybeFinishClose();  // if it was already closing, this was the last thing it waited for
}

void Connection::onCmError(const rdma::CmEvent& e) {
  disconnected_ = true;
  fail(std::string(rdma_event_str(e.type)) + " (" + errnoText(e.status < 0 ? -e.status : e.status) +
       ")");
  maybeFinishClose();
}

void Connection::onDisconnected() {
  disconnected_ = true;
  if (state_.get() != ConnState::kDisconnecting) {
    closeReason_ = "peer disconnected";
    if (state_.get() == ConnState::kAuthenticating) {
      auth_.onPeerClosed();
      closeReason_ = "authentication failed: " + auth_.failure().message();
    }
    rdma_disconnect(id_.get());  // our QP to error (flush) and the reply to the peer
    setState(ConnState::kDisconnecting);
    if (Status st = postBeacon(); !st.ok()) closeReason_ += "; " + st.message();
    closeTimer_->arm(kFlushWait);
  }
  maybeFinishClose();
}

// The rdma_cm handshake is complete: the Hellos are exchanged, the QP is
// ready to send. Without a mesh secret the connection is established; with
// one it authenticates first.
void Connection::onHandshakeDone(const rdma::CmEvent& e) {
  if (active_) {
    Result<Hello> h = decodeHello(e.privateData.data(), e.privateData.size());
    if (!h) return fail("peer answered with an invalid handshake: " + h.status().message());
    remote_ = *h;
    if (remote_->version != kProtocolVersion)
      return fail("peer answered with an invalid handshake: protocol version " +
                  std::to_string(remote_->version) + ", this daemon's " +
                  std::to_string(kProtocolVersion));
    ledger_.knowPeer(*remote_);
  }
  if (Status st = ledger_.takeInitialCredits(); !st.ok()) return fail(st.message());
  // With a mesh secret every batch after the handshake's ends in a trailer.
  const size_t capacity = std::min<size_t>(params_.bufferSize, remote_->bufferSize) -
                          (auth_.required() ? kBatchTrailerSize : 0);
  if (capacity < std::max(sizeof(BatchHeader) + 256, sizeof(BatchHeader) + kAuthRecordSize))
    return fail("peer's receive buffers are too small");
  sender_.setBatchCapacity(capacity);
  if (Status st = auth_.agree(*remote_); !st.ok()) return authFail(st.message());
  if (auth_.required() && ((remote_->flags & kHelloEncrypts) != 0) != params_.encrypt)
    return authFail(params_.encrypt ? "it does not encrypt, and this node has encryption: on"
                                    : "it encrypts (encryption: on), and this node does not");
  if (!auth_.required()) return becomeEstablished();
  startAuthentication(e);
}

void Connection::startAuthentication(const rdma::CmEvent& e) {
  if (active_)
    if (Status st = auth_.takeAcceptorNonce(e.privateData); !st.ok()) return authFail(st.message());
  setState(ConnState::kAuthenticating);
  if (!bindAuthentication()) return;
  if (active_) {
    onAuthStep(auth_.startDialer(*remote_));
    if (down()) return;
  }
  processAuth();  // the dialer's proof may be here before ESTABLISHED was read
}

// The proofs and keys are bound to this RC connection: both queue pair
// numbers and both GIDs, in the dialer's and the acceptor's order.
bool Connection::bindAuthentication() {
  ibv_qp_attr a{};
  ibv_qp_init_attr init{};
  if (const int rc = ibv_query_qp(id_->qp, &a, IBV_QP_DEST_QPN | IBV_QP_AV, &init); rc != 0) {
    fail("ibv_query_qp: " + errnoText(rc));
    return false;
  }
  auth::Gid own{}, theirs{};
  std::copy_n(id_->route.addr.addr.ibaddr.sgid.raw, own.size(), own.begin());
  std::copy_n(id_->route.addr.addr.ibaddr.dgid.raw, theirs.size(), theirs.begin());
  const uint32_t ownQpn = id_->qp->qp_num;
  auth_.bind(active_ ? auth::Binding{ownQpn, a.dest_qp_num, own, theirs}
                     : auth::Binding{a.dest_qp_num, ownQpn, theirs, own});
  return true;
}

// Both ends are proven: every later batch is sealed and verified under the
// connection's session keys, each end sending under its role's key.
void Connection::startSession() {
  const BatchProtection protection =
      params_.encrypt ? BatchProtection::kEncrypt : BatchProtection::kMac;
  Result<SessionKeys> keys = auth_.sessionKeys(protection);
  if (!keys) return fail(keys.status().message());
  const bool dialer = auth_.dialer();
  Status st =
      batchAuth_.start(dialer ? keys->dialerToAcceptor : keys->acceptorToDialer,
                       dialer ? keys->acceptorToDialer : keys->dialerToAcceptor, protection);
  OPENSSL_cleanse(&*keys, sizeof(SessionKeys));
  if (!st.ok()) return fail(st.message());
  becomeEstablished();
}

void Connection::becomeEstablished() {
  connectTimer_->cancel();
  lastSent_ = lastReceived_ = std::chrono::steady_clock::now();
  setState(ConnState::kEstablished);
}

// Reads the peer's authentication record: the first batch, alone.
void Connection::processAuth() {
  while (state_.get() == ConnState::kAuthenticating && receiver_.hasBatch()) {
    const Result<Authenticator::Step> step = auth_.onBatch(frontBatch());
    consumeBatch(0);
    onAuthStep(step);
  }
}

// A failed step is permission_denied (authentication failed) or this node's own failure.
void Connection::onAuthStep(const Result<Authenticator::Step>& step) {
  using Kind = Authenticator::Step::Kind;
  if (!step)
    return step.status().code() == Errc::permission_denied ? authFail(step.status().message())
                                                           : fail(step.status().message());
  switch (step->kind) {
    case Kind::kSend:
      return sendAuth(step->record);
    case Kind::kAnswer:
      sendAuth(step->record);
      if (down()) return;
      [[fallthrough]];
    case Kind::kProven:
      auth_.settle(step->secret);
      return startSession();
  }
}

void Connection::sendAuth(const AuthBody& body) {
  if (!sender_.open(false) || sender_.batch().room() < kAuthRecordSize)
    return fail("no send buffer or credit for the authentication record");
  sender_.batch().addAuth(body);
  sender_.sealBare();
  postSends();
}

void Connection::authFail(const std::string& why) {
  if (down()) return;
  auth_.refuse(why);
  fail("authentication failed: " + why);
}

void Connection::onQpEvent(ibv_event_type type) {
  if (type == IBV_EVENT_QP_LAST_WQE_REACHED) {
    // The QP is in error (its own failure comes with its own event): it
    // takes nothing more from the shared receive queue.
    receiver_.onLastWqe();
    maybeFinishClose();
    return;
  }
  fail(std::string("queue pair event: ") + ibv_event_type_str(type));
}

void Connection::fail(const std::string& why) {
  close(why);
}

void Connection::close(const std::string& why) {
  if (down()) return;
  closeReason_ = why;
  connectTimer_->cancel();
  if (qp_) {
    // Established: disconnect and wait for DISCONNECTED (the seeds' order).
    // Not established: tell the peer (best effort) and flush the QP by hand,
    // with no DISCONNECTED to wait for.
    bool established =
        state_.get() == ConnState::kEstablished || state_.get() == ConnState::kAuthenticating;
    bool requested =
        state_.get() == ConnState::kAccepting || state_.get() == ConnState::kConnecting;
    if (requested && !disconnected_) rdma_disconnect(id_.get());
    if (!established || disconnected_ || rdma_disconnect(id_.get()) != 0) {
      ibv_qp_attr a{};
      a.qp_state = IBV_QPS_ERR;
      ibv_modify_qp(id_->qp, &a, IBV_QP_STATE);
      disconnected_ = true;
    }
  } else {
    disconnected_ = true;
  }
  setState(ConnState::kDisconnecting);
  if (Status st = postBeacon(); !st.ok()) closeReason_ += "; " + st.message();
  closeTimer_->arm(kFlushWait);
  // The reason is the Peer's to log (Peer::onDown), once.
  spdlog::debug("peer {}: closing connection: {}", name_, closeReason_);
  maybeFinishClose();
}

void Connection::abandon(const std::string& why) {
  if (state_.get() == ConnState::kClosed) return;
  if (!down()) closeReason_ = why;
  connectTimer_->cancel();
  closeTimer_->cancel();
  sender_.forgetOutstanding();
  receiver_.forgetPosted();
  disconnected_ = true;
  setState(ConnState::kDisconnecting);
  setState(ConnState::kClosed);
}

// After the QP went to error: a signaled request posted behind every other
// one. Its (flushed) completion means all earlier sends are done, including
// unsignaled ones that completed without a completion entry. Without it
// the close waits for the flush timeout: io_error naming the call, which
// the caller adds to the close reason.
Status Connection::postBeacon() {
  if (!qp_ || beaconPosted_) return Status();
  ibv_send_wr w{};
  w.wr_id = kBeaconTag;
  w.opcode = IBV_WR_SEND;
  w.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  if (const int rc = ibv_post_send(id_->qp, &w, &bad); rc != 0)
    return Status(Errc::io_error,
                  "the teardown beacon was not posted (ibv_post_send: " + errnoText(rc) + ")");
  beaconPosted_ = true;
  return Status();
}

void Connection::maybeFinishClose() {
  if (state_.get() != ConnState::kDisconnecting || !disconnected_) return;
  if (sender_.outstanding() != 0) return;
  if (qp_ && !receiver_.drained()) return;
  closeTimer_->cancel();
  setState(ConnState::kClosed);
}

void Connection::onCompletion(const ibv_wc& wc) {
  uint64_t tag = wc.wr_id & rdma::kWrTagMask;
  if (tag == kBeaconTag) return onBeacon();
  auto idx = static_cast<uint32_t>(wc.wr_id & 0xffffffff);
  const bool isSend = tag == Sender::kTag;
  const bool isRecv = receiver_.isReceive(tag);
  if (wc.status != IBV_WC_SUCCESS) return onFailedCompletion(wc, idx, isSend, isRecv);
  // Seed 004: a successful completion is checked for what it is (and, a
  // receive, how much it carries).
  if (isSend) {
    if (wc.opcode != IBV_WC_SEND) return fail("send completion with an unexpected opcode");
    onSendDone(idx);
    wake_();
  } else if (isRecv) {
    onReceived(wc);
  } else {
    fail("completion with an unknown work request id");
  }
}

// Flushed behind every send: they are all done.
void Connection::onBeacon() {
  sender_.onBeacon();
  maybeFinishClose();
}

void Connection::onFailedCompletion(const ibv_wc& wc, uint32_t idx, bool isSend, bool isRecv) {
  if (isSend)
    onSendDone(idx);
  else if (isRecv)
    receiver_.onFlushed();
  // A flushed request only says that the QP went to error; the cause comes
  // with its own event (a CM event, or the first failed request).
  if (wc.status != IBV_WC_WR_FLUSH_ERR)
    fail(std::string(isSend ? "send" : "receive") + " failed: " + ibv_wc_status_str(wc.status));
  else if (state_.get() == ConnState::kEstablished)
    fail("queue pair in error (work requests flushed)");
  maybeFinishClose();
}

void Connection::onSendDone(uint32_t index) {
  if (Status st = sender_.onCompleted(index); !st.ok()) fail(st.message());
}

void Connection::onReceived(const ibv_wc& wc) {
  // On the passive side a batch may complete before ESTABLISHED is read; it
  // proves the connection up (without a secret, up is established), so its
  // loss from here on is the loss of an established connection.
  if (state_.get() == ConnState::kAccepting && !auth_.required()) wasEstablished_ = true;
  const Result<Receiver::Arrival> arrival = receiver_.onReceived(wc, params_.bufferSize, down());
  if (!arrival) {
    // A batch the peer sent that did not verify, while authenticating, is
    // an authentication failure; anything else fails the connection.
    if (receiver_.rejected() && state_.get() == ConnState::kAuthenticating)
      return authFail(arrival.status().message());
    return fail(arrival.status().message());
  }
  if (*arrival != Receiver::Arrival::kBatch) return;
  lastReceived_ = std::chrono::steady_clock::now();
  if (state_.get() == ConnState::kAuthenticating) processAuth();
  wake_();
}

bool Connection::openBatch(bool dataRecord) {
  if (state_.get() != ConnState::kEstablished || !sealFailure_.ok()) return false;
  return sender_.open(dataRecord);
}

size_t Connection::messageRoom() {
  if (!openBatch(true)) return 0;
  return sender_.batch().room();
}

// Not with a mesh secret: a batch's MAC covers its payload, which a client
// could change in its shared memory between the MAC and the NIC's read —
// the peer would reject the batch and close the link for every flow.
bool Connection::canPostInPlace(ExternalArea& area) {
  return !auth_.required() && device_ != nullptr && device_->lkeyFor(area).ok();
}

void Connection::sealInPlace(const PayloadHandle& payload, std::span<const std::byte> bytes) {
  noteSealed(sender_.sealInPlace(payload, bytes, *device_->lkeyFor(payload.area())));
}

void Connection::post() {
  if (state_.get() != ConnState::kEstablished) return;
  // Session keys last for 2^48 batches and 65535 rotations: then a new
  // connection, with new keys.
  if (batchAuth_.spent()) return close("session keys used up: connecting again");
  if (!postReceives()) return;
  // A credit-only batch.
  if (!sender_.hasOpen() && !sender_.hasSealed() && ledger_.wantsCreditReturn()) openBatch(false);
  noteSealed(sender_.seal());
  if (!sealFailure_.ok()) return fail(sealFailure_.message());
  postSends();
}

void Connection::postSends() {
  if (!sender_.hasSealed()) return;
  if (Status st = sender_.post(id_->qp); !st.ok()) return fail(st.message());
  lastSent_ = std::chrono::steady_clock::now();
}

}  // namespace rdmamsg::peer
