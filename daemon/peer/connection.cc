// One RDMA connection to a peer daemon (connection.h).
#include "daemon/peer/connection.h"
#include "config/address.h"
#include "daemon/logging.h"
#include "daemon/peer/auth.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <system_error>

namespace rdmamsg::peer {

namespace {

constexpr uint32_t kSignalEvery = 16;
constexpr uint64_t kSendTag = 1ULL << 32;
constexpr uint64_t kRecvTag = rdma::kQpRecvTag;
constexpr uint64_t kBeaconTag = 3ULL << 32;
constexpr auto kFlushWait = std::chrono::seconds(2);

std::string errnoText(int e) {
  return std::error_code(e, std::generic_category()).message();
}

bool edgeAllowed(ConnState from, ConnState to) {
  switch (from) {
    case ConnState::kIdle:
      return to == ConnState::kResolvingAddress || to == ConnState::kAccepting ||
             to == ConnState::kDisconnecting;
    case ConnState::kResolvingAddress:
      return to == ConnState::kResolvingRoute || to == ConnState::kDisconnecting;
    case ConnState::kResolvingRoute:
      return to == ConnState::kConnecting || to == ConnState::kDisconnecting;
    case ConnState::kConnecting:
    case ConnState::kAccepting:
      return to == ConnState::kAuthenticating || to == ConnState::kEstablished ||
             to == ConnState::kDisconnecting;
    case ConnState::kAuthenticating:
      return to == ConnState::kEstablished || to == ConnState::kDisconnecting;
    case ConnState::kEstablished:
      return to == ConnState::kDisconnecting;
    case ConnState::kDisconnecting:
      return to == ConnState::kClosed;
    case ConnState::kClosed:
      return false;
  }
  return false;
}

}  // namespace

const char* toString(ConnState s) {
  switch (s) {
    case ConnState::kIdle:
      return "idle";
    case ConnState::kResolvingAddress:
      return "resolving-address";
    case ConnState::kResolvingRoute:
      return "resolving-route";
    case ConnState::kConnecting:
      return "connecting";
    case ConnState::kAccepting:
      return "accepting";
    case ConnState::kAuthenticating:
      return "authenticating";
    case ConnState::kEstablished:
      return "established";
    case ConnState::kDisconnecting:
      return "disconnecting";
    case ConnState::kClosed:
      return "closed";
  }
  return "?";
}

Connection::Connection(loop::EventLoop& loop, const ConnParams& params, DeviceFor devices,
                       std::string name, loop::ServiceQueue::Waker wake)
    : params_(params),
      devices_(std::move(devices)),
      name_(std::move(name)),
      wake_(wake),
      connectTimer_(std::make_unique<loop::Timer>(
          loop,
          [this] {
            std::string limit = std::to_string(params_.connectTimeout.count()) + " ms";
            if (state_ == ConnState::kAuthenticating)
              authFail("the peer's proof did not come within " + limit);
            else
              fail("connection not established within " + limit);
          })),
      closeTimer_(std::make_unique<loop::Timer>(loop, [this] {
        spdlog::warn("peer {}: flushed work requests did not all return; closing anyway", name_);
        postedSends_ = postedRecvs_ = 0;
        lastWqe_ = true;
        disconnected_ = true;
        maybeFinishClose();
      })) {
  lastSent_ = lastReceived_ = lastDataSent_ = std::chrono::steady_clock::now();
}

Connection::~Connection() {
  if (qp_) {
    device_->detach(id_->qp->qp_num);
    qp_.reset();
  }
  // The QP is gone, so no work request refers to the buffers any more: they
  // serve the next connection on this device.
  giveBackBuffers();
}

void Connection::giveBackBuffers() {
  if (device_ == nullptr) return;
  rdma::SendPool& pool = device_->sendPool();
  pool.retireUnsignaled(unsignaled_);
  unsignaled_ = 0;
  if (open_) pool.give(openIdx_);
  for (auto [idx, bytes] : sealed_)
    pool.give(idx);
  while (!sendPosted_.empty()) {
    pool.give(sendPosted_.front());
    sendPosted_.pop_front();
  }
  open_ = false;
  sealed_.clear();
  if (srq_ != nullptr) {
    for (const Received& r : received_)
      srq_->release(r.index);
    for (uint32_t idx : repost_)
      srq_->release(idx);
    srq_->giveBack(lent_);
    if (reservedInitial_) srq_->releaseInitial();
    srq_->refill();
    srq_ = nullptr;
  }
  received_.clear();
  repost_.clear();
  if (recvSet_) device_->returnReceiveSet(std::move(recvSet_));
}

void Connection::releaseVerbs(const std::string& why) {
  abandon(why);
  if (qp_) {
    device_->detach(id_->qp->qp_num);
    qp_.reset();
  }
  // The device's pools go with it: nothing to give back.
  recvSet_.reset();
  srq_ = nullptr;
  open_ = false;
  sealed_.clear();
  sendPosted_.clear();
  device_ = nullptr;
}

// The one place a connection changes state: every edge is logged and checked,
// and the owner is marked for its service step.
void Connection::setState(ConnState s) {
  if (s == state_) return;
  if (!edgeAllowed(state_, s)) {
    logging::fatal(fmt::format("peer {}: invalid connection state change {} -> {}", name_,
                               toString(state_), toString(s)));
  }
  spdlog::debug("peer {}: {} -> {}", name_, toString(state_), toString(s));
  state_ = s;
  wake_();
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
  if (rdma_resolve_addr(id_.get(), const_cast<sockaddr*>(src), const_cast<sockaddr*>(dst), 2000) !=
      0)
    fail("rdma_resolve_addr: " + errnoText(errno));
}

void Connection::accept(rdma_cm_id* id, const Hello& remote) {
  id_.reset(id);
  id_->context = static_cast<rdma::CmHandler*>(this);
  remote_ = remote;
  remoteAddress_ = config::Address::textOf(rdma_get_peer_addr(id_.get()));
  connectTimer_->arm(params_.connectTimeout);
  setState(ConnState::kAccepting);
  if (!createQp(id_.get())) return;
  rdma_conn_param p{};
  AcceptData data{};
  data.hello = params_.hello;
  p.private_data = &data.hello;
  p.private_data_len = sizeof(Hello);
  if (!params_.secrets.empty()) {
    try {
      ownNonce_ = auth::freshNonce();
    } catch (const std::exception& e) {
      return fail(e.what());
    }
    std::memcpy(data.nonce, ownNonce_.data(), kNonceSize);
    p.private_data = &data;
    p.private_data_len = sizeof data;
  }
  p.responder_resources = 0;
  p.initiator_depth = 0;
  p.rnr_retry_count = 7;
  if (rdma_accept(id_.get(), &p) != 0) fail("rdma_accept: " + errnoText(errno));
}

bool Connection::createQp(rdma_cm_id* id) {
  device_ = devices_(id->verbs);
  if (device_ == nullptr) {
    fail("no RDMA device resources");
    return false;
  }
  srq_ = device_->srq();
  if (srq_ != nullptr) {
    if (std::string why = srq_->reserveInitial(); !why.empty()) {
      srq_ = nullptr;
      fail("receive buffers: " + why);
      return false;
    }
    reservedInitial_ = true;
  } else {
    try {
      recvSet_ = device_->takeReceiveSet(params_.maxCredits, kRecvTag);
    } catch (const std::exception& e) {
      fail(std::string("receive buffers: ") + e.what());
      return false;
    }
  }
  params_.bufferSize = device_->pools().bufferSize;
  ibv_qp_init_attr a{};
  a.send_cq = device_->cq();
  a.recv_cq = device_->cq();
  a.srq = srq_ != nullptr ? srq_->srq() : nullptr;
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = params_.sendBuffers + 1;  // + the teardown beacon
  a.cap.max_recv_wr = srq_ != nullptr ? 0 : params_.maxCredits;
  a.cap.max_send_sge = 1;
  a.cap.max_recv_sge = srq_ != nullptr ? 0 : 1;
  a.sq_sig_all = 0;
  if (rdma_create_qp(id, device_->pd(), &a) != 0) {
    fail("rdma_create_qp: " + errnoText(errno));
    return false;
  }
  qp_.reset(id);
  device_->attach(id->qp->qp_num, this);
  // Use what the device granted (it may round up, never below what was asked).
  sendCap_ = std::min(params_.sendBuffers, a.cap.max_send_wr - 1);
  if (srq_ != nullptr) {
    allowance_ = granted_ = device_->pools().initialGrant;
    params_.hello.flags |= kHelloSharedReceive;
    params_.hello.maxCredits = params_.maxCredits;
  } else {
    recvCount_ = std::min(params_.maxCredits, a.cap.max_recv_wr);
    allowance_ = granted_ = recvCount_;
    params_.hello.maxCredits = recvCount_;
    for (uint32_t i = 0; i < recvCount_; i++)
      repost_.push_back(i);
  }
  params_.hello.bufferCount = granted_;
  // Receive buffers are in place before the connection is requested or accepted.
  return postReceives(/*initial=*/true);
}

std::byte* Connection::recvAt(uint32_t index) const {
  return srq_ != nullptr ? srq_->at(index) : recvSet_->pool().at(index);
}

// Reposts the receive buffers in repost_: to the shared receive queue, or
// on this QP as one list of their pre-built work requests.
bool Connection::postReceives(bool initial) {
  if (repost_.empty()) return true;
  auto n = static_cast<uint32_t>(repost_.size());
  if (srq_ != nullptr) {
    for (uint32_t idx : repost_)
      srq_->release(idx);
    if (!srq_->refill()) {
      fail("ibv_post_srq_recv failed");
      return false;
    }
  } else {
    for (size_t i = 0; i < repost_.size(); i++)
      recvSet_->wr(repost_[i])->next =
          i + 1 < repost_.size() ? recvSet_->wr(repost_[i + 1]) : nullptr;
    ibv_recv_wr* bad = nullptr;
    if (int rc = ibv_post_recv(id_->qp, recvSet_->wr(repost_[0]), &bad); rc != 0) {
      fail("ibv_post_recv: " + errnoText(rc));
      return false;
    }
    postedRecvs_ += n;
  }
  counters_.recvsPosted += n;
  counters_.postRecvCalls++;
  if (!initial) held_ -= std::min(held_, n);
  repost_.clear();
  return true;
}

uint32_t Connection::owedCredits() const {
  uint64_t out = uint64_t{granted_} + held_;
  return allowance_ > out ? static_cast<uint32_t>(allowance_ - out) : 0;
}

void Connection::onCmEvent(const rdma::CmEvent& e) {
  if (state_ == ConnState::kClosed) return;
  if (state_ == ConnState::kDisconnecting) {
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
    case RDMA_CM_EVENT_ROUTE_RESOLVED: {
      if (!createQp(id_.get())) return;
      rdma_conn_param p{};
      p.private_data = &params_.hello;
      p.private_data_len = sizeof(Hello);
      p.retry_count = 7;
      p.rnr_retry_count = 7;
      setState(ConnState::kConnecting);
      if (rdma_connect(id_.get(), &p) != 0) fail("rdma_connect: " + errnoText(errno));
      return;
    }
    case RDMA_CM_EVENT_ESTABLISHED:
      onHandshakeDone(e);
      return;
    case RDMA_CM_EVENT_REJECTED: {
      auto h = decodeHello(e.privateData.data(), e.privateData.size());
      rejected_ = h ? h->reason : RejectReason::kNone;
      disconnected_ = true;
      fail(h ? std::string("rejected by peer: ") + toString(h->reason)
             : "rejected (status " + std::to_string(e.status) + ", nobody listening?)");
      maybeFinishClose();  // if it was already closing, this was the last thing it waited for
      return;
    }
    case RDMA_CM_EVENT_ADDR_ERROR:
    case RDMA_CM_EVENT_ROUTE_ERROR:
    case RDMA_CM_EVENT_UNREACHABLE:
    case RDMA_CM_EVENT_CONNECT_ERROR:
      disconnected_ = true;
      fail(std::string(rdma_event_str(e.type)) + " (" +
           errnoText(e.status < 0 ? -e.status : e.status) + ")");
      maybeFinishClose();
      return;
    case RDMA_CM_EVENT_DISCONNECTED:
      disconnected_ = true;
      if (state_ != ConnState::kDisconnecting) {
        closeReason_ = "peer disconnected";
        if (state_ == ConnState::kAuthenticating) {
          // Counted as an authentication failure: the peer refused our proof,
          // or went away before it proved itself.
          authFailure_ = active_ ? "the peer closed the connection after this node's proof "
                                   "(does it hold the same mesh secret? its log says)"
                                 : "the peer closed the connection before proving the mesh secret";
          closeReason_ = "authentication failed: " + authFailure_;
        }
        rdma_disconnect(id_.get());  // our QP to error (flush) and the reply to the peer
        setState(ConnState::kDisconnecting);
        postBeacon();
        closeTimer_->arm(kFlushWait);
      }
      maybeFinishClose();
      return;
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
      // The id must be destroyed: nothing more will complete on this device.
      if (device_ != nullptr) device_->markFailed();
      abandon("RDMA device removed");
      return;
    case RDMA_CM_EVENT_ADDR_CHANGE:
      close("local address changed");
      return;
    default:
      return;  // TIMEWAIT_EXIT, ...: nothing to do
  }
}

// The rdma_cm handshake is complete: the Hellos are exchanged, the QP is
// ready to send. Without a mesh secret the connection is established; with
// one it authenticates first.
void Connection::onHandshakeDone(const rdma::CmEvent& e) {
  if (active_) {
    remote_ = decodeHello(e.privateData.data(), e.privateData.size());
    if (!remote_ || remote_->version != kProtocolVersion) {
      fail("peer answered with an invalid handshake");
      return;
    }
  }
  credits_ += remote_->bufferCount;  // plus any returned by batches already here
  if (credits_ > remoteMaxCredits()) {
    fail("peer returned more credits than it has receive buffers");
    return;
  }
  batchCapacity_ = std::min<size_t>(params_.bufferSize, remote_->bufferSize);
  if (batchCapacity_ < std::max(sizeof(BatchHeader) + 256, sizeof(BatchHeader) + kAuthRecordSize)) {
    fail("peer's receive buffers are too small");
    return;
  }
  const bool ours = !params_.secrets.empty();
  const bool theirs = (remote_->flags & kHelloAuthenticates) != 0;
  if (ours != theirs)
    return authFail(ours ? "it does not authenticate (no mesh secret), and this node requires it"
                         : "it authenticates with a mesh secret, and this node has none");
  if (!ours) return becomeEstablished();
  if (active_) {
    if (e.privateData.size() < sizeof(AcceptData)) return authFail("its answer carries no nonce");
    std::memcpy(remoteNonce_.data(), e.privateData.data() + offsetof(AcceptData, nonce),
                kNonceSize);
  }
  setState(ConnState::kAuthenticating);
  if (active_) {
    AuthBody body{};
    try {
      ownNonce_ = auth::freshNonce();
      std::memcpy(body.nonce, ownNonce_.data(), kNonceSize);
      const auth::Transcript t = transcript();
      for (size_t k = 0; k < params_.secrets.size() && k < 2; k++) {
        auto proof = auth::prove(params_.secrets[k].bytes, auth::Role::kDialer, t);
        std::memcpy(body.proofs[k], proof.data(), kProofSize);
        body.proofCount++;
      }
    } catch (const std::exception& e2) {
      return fail(e2.what());
    }
    sendAuth(body);
  }
  processAuth();  // the dialer's proof may be here before ESTABLISHED was read
}

void Connection::becomeEstablished() {
  connectTimer_->cancel();
  lastSent_ = lastReceived_ = std::chrono::steady_clock::now();
  setState(ConnState::kEstablished);
}

// Reads the peer's authentication record: the first batch, alone.
void Connection::processAuth() {
  while (state_ == ConnState::kAuthenticating && !received_.empty()) {
    BatchReader reader(frontBatch());
    Record rec;
    if (!reader.open() || reader.records() != 1 || reader.next(rec) != 1 ||
        rec.type != RecordType::kAuth || reader.next(rec) != 0)
      return authFail("its first batch is not an authentication record");
    consumeBatch(0);
    onAuth(rec.auth);
  }
}

void Connection::onAuth(const AuthBody& body) {
  try {
    const auto& secrets = params_.secrets;
    if (active_) {
      // The acceptor's proof, under whichever of our secrets it matched.
      const auth::Transcript t = transcript();
      for (size_t k = 0; k < secrets.size(); k++) {
        if (auth::verify(secrets[k].bytes, auth::Role::kAcceptor, t, body.proofs[0])) {
          secretIndex_ = k;
          authenticated_ = true;
          return becomeEstablished();
        }
      }
      return authFail(proofMismatch());
    }
    // The dialer's proofs (one per secret it holds), against ours, current first.
    std::memcpy(remoteNonce_.data(), body.nonce, kNonceSize);
    const auth::Transcript t = transcript();
    for (size_t k = 0; k < secrets.size(); k++) {
      for (uint8_t j = 0; j < body.proofCount && j < 2; j++) {
        if (!auth::verify(secrets[k].bytes, auth::Role::kDialer, t, body.proofs[j])) continue;
        AuthBody answer{};
        answer.proofCount = 1;
        auto proof = auth::prove(secrets[k].bytes, auth::Role::kAcceptor, t);
        std::memcpy(answer.proofs[0], proof.data(), kProofSize);
        sendAuth(answer);
        if (down()) return;
        secretIndex_ = k;
        authenticated_ = true;
        return becomeEstablished();
      }
    }
    authFail(proofMismatch());
  } catch (const std::exception& e) {
    fail(e.what());
  }
}

// The proofs' transcript: the dialer's name, incarnation and nonce first.
auth::Transcript Connection::transcript() const {
  if (active_)
    return {params_.selfName,     name_,     params_.hello.incarnation,
            remote_->incarnation, ownNonce_, remoteNonce_};
  return {name_,        params_.selfName, remote_->incarnation, params_.hello.incarnation,
          remoteNonce_, ownNonce_};
}

std::string Connection::proofMismatch() const {
  return std::string("its proof does not match this node's mesh secret") +
         (params_.secrets.size() > 1 ? " or the previous one" : "");
}

void Connection::sendAuth(const AuthBody& body) {
  if (!reserveBatch(false) || writer_.room() < kAuthRecordSize)
    return fail("no send buffer or credit for the authentication record");
  writer_.addAuth(body);
  sealBatch();
  postSealed();
}

void Connection::authFail(const std::string& why) {
  if (down()) return;
  authFailure_ = why;
  fail("authentication failed: " + why);
}

void Connection::onQpEvent(ibv_event_type type) {
  if (type == IBV_EVENT_QP_LAST_WQE_REACHED) {
    // The QP is in error (its own failure comes with its own event): it
    // takes nothing more from the shared receive queue.
    lastWqe_ = true;
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
  bool wasUp = state_ == ConnState::kEstablished;
  connectTimer_->cancel();
  if (qp_) {
    // Established: disconnect and wait for DISCONNECTED (the seeds' order).
    // Not established: tell the peer (best effort) and flush the QP by hand,
    // with no DISCONNECTED to wait for.
    bool established = state_ == ConnState::kEstablished || state_ == ConnState::kAuthenticating;
    bool requested = state_ == ConnState::kAccepting || state_ == ConnState::kConnecting;
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
  postBeacon();
  closeTimer_->arm(kFlushWait);
  if (wasUp) spdlog::info("peer {}: closing connection: {}", name_, why);
  maybeFinishClose();
}

void Connection::abandon(const std::string& why) {
  if (state_ == ConnState::kClosed) return;
  if (!down()) closeReason_ = why;
  connectTimer_->cancel();
  closeTimer_->cancel();
  postedSends_ = postedRecvs_ = 0;
  disconnected_ = lastWqe_ = true;
  setState(ConnState::kDisconnecting);
  setState(ConnState::kClosed);
}

// After the QP went to error: a signaled request posted behind every other
// one. Its (flushed) completion means all earlier sends are done, including
// unsignaled ones that completed without a completion entry.
void Connection::postBeacon() {
  if (!qp_ || beaconPosted_) return;
  ibv_send_wr w{};
  w.wr_id = kBeaconTag;
  w.opcode = IBV_WR_SEND;
  w.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  if (ibv_post_send(id_->qp, &w, &bad) == 0) beaconPosted_ = true;
}

void Connection::maybeFinishClose() {
  if (state_ != ConnState::kDisconnecting || !disconnected_) return;
  if (postedSends_ != 0 || postedRecvs_ != 0) return;
  if (srq_ != nullptr && qp_ && !lastWqe_) return;
  closeTimer_->cancel();
  setState(ConnState::kClosed);
}

void Connection::onCompletion(const ibv_wc& wc) {
  uint64_t tag = wc.wr_id & rdma::kWrTagMask;
  if (tag == kBeaconTag) {
    // Flushed behind every send: they are all done.
    device_->sendPool().retireUnsignaled(unsignaled_);
    unsignaled_ = 0;
    while (!sendPosted_.empty()) {
      device_->sendPool().give(sendPosted_.front());
      sendPosted_.pop_front();
    }
    postedSends_ = 0;
    maybeFinishClose();
    return;
  }
  auto idx = static_cast<uint32_t>(wc.wr_id & 0xffffffff);
  const bool isSend = tag == kSendTag;
  const bool isRecv = srq_ != nullptr ? tag == rdma::kSrqRecvTag : tag == kRecvTag;
  if (wc.status != IBV_WC_SUCCESS) {
    if (isSend)
      onSendDone(idx);
    else if (isRecv && srq_ == nullptr)
      postedRecvs_--;
    // A flushed request only says that the QP went to error; the cause comes
    // with its own event (a CM event, or the first failed request).
    if (wc.status != IBV_WC_WR_FLUSH_ERR)
      fail(std::string(isSend ? "send" : "receive") + " failed: " + ibv_wc_status_str(wc.status));
    else if (state_ == ConnState::kEstablished)
      fail("queue pair in error (work requests flushed)");
    maybeFinishClose();
    return;
  }
  // Seed 004: a successful completion is checked for what it is and how much it carries.
  if (isSend) {
    if (wc.opcode != IBV_WC_SEND) {
      fail("send completion with an unexpected opcode");
      return;
    }
    onSendDone(idx);
    wake_();
  } else if (isRecv) {
    if (srq_ == nullptr) postedRecvs_--;
    const bool known = srq_ != nullptr ? srq_->owns(idx) : idx < recvCount_;
    if (wc.opcode != IBV_WC_RECV || !known || wc.byte_len > params_.bufferSize) {
      if (srq_ != nullptr && known) srq_->release(idx);
      fail("receive completion with an unexpected opcode, id or length");
      return;
    }
    onRecvDone(idx, wc.byte_len);
  } else {
    fail("completion with an unknown work request id");
  }
}

// A completion frees its buffer and every unsignaled one posted before it.
void Connection::onSendDone(uint32_t index) {
  rdma::SendPool& pool = device_->sendPool();
  size_t i = 0;
  while (i < sendPosted_.size() && sendPosted_[i] != index)
    i++;
  if (i == sendPosted_.size()) {
    fail("send completion for a buffer that was not posted");
    return;
  }
  for (size_t k = 0; k <= i; k++) {
    pool.give(sendPosted_.front());
    sendPosted_.pop_front();
  }
  postedSends_ -= std::min<uint32_t>(postedSends_, static_cast<uint32_t>(i + 1));
}

void Connection::onRecvDone(uint32_t index, uint32_t bytes) {
  if (down()) {
    // Arrived as it closes: nobody reads it.
    if (srq_ != nullptr)
      srq_->release(index);
    else
      repost_.push_back(index);
    return;
  }
  // On the passive side the first batches may complete before ESTABLISHED
  // is read from the event channel: they wait in received_ like any other.
  lastReceived_ = std::chrono::steady_clock::now();
  counters_.batchesReceived++;
  held_++;
  received_.push_back({index, bytes});
  BatchReader reader({recvAt(index), bytes});
  if (!reader.open()) {
    fail("malformed batch from peer");
    return;
  }
  if (!onCredits(reader)) return;
  if (state_ == ConnState::kAuthenticating) processAuth();
  wake_();
}

// The credits a batch spends, returns and releases, checked against what
// each end granted.
bool Connection::onCredits(const BatchReader& reader) {
  if (granted_ == 0) {
    fail("peer sent a batch without a credit");
    return false;
  }
  granted_--;
  if (reader.released() > granted_) {
    fail("peer released more credits than it holds");
    return false;
  }
  if (uint32_t r = reader.released(); r > 0) {
    granted_ -= r;
    counters_.creditsReleased += r;
    if (srq_ != nullptr) {
      // Back to the device's burst buffers, down to the initial grant.
      uint32_t back = std::min(r, lent_);
      srq_->giveBack(back);
      lent_ -= back;
      allowance_ -= back;
    }
  }
  // A peer never has more buffers for us than it announced: more credits
  // would make this end overrun its receive buffers.
  if (remote_ && uint64_t{credits_} + reader.credits() > remoteMaxCredits()) {
    fail("peer returned more credits than it has receive buffers");
    return false;
  }
  credits_ += reader.credits();  // the peer's buffers: usable at once
  // A peer that spends its credits on messages faster than they come back
  // is lent more (a batch that releases credits says the peer is idle).
  if (srq_ != nullptr && granted_ * 2 <= allowance_ && allowance_ < params_.maxCredits &&
      reader.released() == 0 && carriesMessages(reader)) {
    uint32_t more = srq_->lend(allowance_, params_.maxCredits);
    allowance_ += more;
    lent_ += more;
    counters_.creditsLent += more;
  }
  return true;
}

// Whether a batch has a message among its first records (confirmations and
// heartbeats come first, when a batch has them).
bool Connection::carriesMessages(BatchReader reader) {
  Record rec;
  for (int i = 0; i < 4 && reader.next(rec) == 1; i++)
    if (rec.type == RecordType::kMessage) return true;
  return false;
}

uint32_t Connection::remoteMaxCredits() const {
  return remote_->maxCredits != 0 ? remote_->maxCredits : remote_->bufferCount;
}

std::span<const std::byte> Connection::batchAt(size_t i) const {
  const Received& r = received_[i];
  return {recvAt(r.index), r.bytes};
}

void Connection::consumeBatch(size_t i) {
  repost_.push_back(received_[i].index);
  received_.erase(received_.begin() + static_cast<std::ptrdiff_t>(i));
}

bool Connection::openBatch(bool dataRecord) {
  if (state_ != ConnState::kEstablished) return false;
  return reserveBatch(dataRecord);
}

bool Connection::reserveBatch(bool dataRecord) {
  if (open_) {
    if (dataRecord && openOnReserve_) return false;
    openForData_ = openForData_ || dataRecord;
    return true;
  }
  uint32_t need = dataRecord ? 2 : 1;  // one credit stays for batches without messages
  if (credits_ < need || sendHeld() >= sendCap_) {
    if (dataRecord) counters_.creditStalls++;
    return false;
  }
  std::optional<uint32_t> idx = device_->sendPool().take(wake_);
  if (!idx) {
    counters_.sendPoolWaits++;
    return false;
  }
  credits_--;
  openOnReserve_ = credits_ == 0;
  openForData_ = dataRecord;
  openIdx_ = *idx;
  writer_.reset(device_->sendPool().buffers().at(openIdx_), batchCapacity_);
  open_ = true;
  return true;
}

size_t Connection::messageRoom() {
  if (!openBatch(true)) return 0;
  return writer_.room();
}

void Connection::sealBatch() {
  if (!open_) return;
  uint32_t released = 0;
  const auto now = std::chrono::steady_clock::now();
  if (openForData_) {
    lastDataSent_ = now;
  } else if (remote_ && (remote_->flags & kHelloSharedReceive) != 0 &&
             now - lastDataSent_ >= params_.releaseAfter) {
    // No data for a while: keep what the peer grants an idle connection, its
    // initial grant, of which this batch spends one (back when it is read).
    const uint32_t keep = remote_->bufferCount > 0 ? remote_->bufferCount - 1 : 0;
    if (credits_ > keep) {
      released = std::min<uint32_t>(credits_ - keep, 0xffff);
      credits_ -= released;
    }
  }
  const uint32_t owed = owedCredits();
  auto bytes = static_cast<uint32_t>(writer_.finish(owed, static_cast<uint16_t>(released)));
  granted_ += owed;
  sealed_.emplace_back(openIdx_, bytes);
  open_ = false;
}

// A batch of nothing but credits spends one of the peer's: it must return
// more than that (at least 2), or two ends would answer each other's
// returns forever. With 3 or more buffers this never strands a peer below
// the 2 credits a message needs.
bool Connection::wantsCreditReturn() const {
  const uint32_t least = allowance_ <= 2 ? 1 : std::max<uint32_t>(2, allowance_ / 4);
  return owedCredits() >= least;
}

void Connection::post() {
  if (state_ != ConnState::kEstablished) return;
  if (!postReceives()) return;
  if (!open_ && sealed_.empty() && wantsCreditReturn()) openBatch(false);  // a credit-only batch
  sealBatch();
  postSealed();
}

void Connection::postSealed() {
  if (sealed_.empty()) return;
  std::vector<ibv_send_wr>& wrs = wrScratch_;
  std::vector<ibv_sge>& sges = sgeScratch_;
  wrs.resize(sealed_.size());
  sges.resize(sealed_.size());
  rdma::SendPool& sendPool = device_->sendPool();
  rdma::BufferPool& pool = sendPool.buffers();
  const uint32_t signalEvery = std::min(kSignalEvery, std::max<uint32_t>(1, sendCap_ / 2));
  for (size_t i = 0; i < sealed_.size(); i++) {
    auto [idx, bytes] = sealed_[i];
    sges[i] = {pool.addr(idx), bytes, pool.lkey()};
    ibv_send_wr& w = wrs[i];
    w = ibv_send_wr{};
    w.wr_id = kSendTag | idx;
    w.sg_list = &sges[i];
    w.num_sge = 1;
    w.opcode = IBV_WR_SEND;
    bool last = i + 1 == sealed_.size();
    // Selective signaling: every signalEvery-th send, and sooner when the
    // device's pool has a quarter of its buffers behind unsignaled sends (a
    // connection that goes quiet keeps those until its next signaled one),
    // or runs low at the end of a burst.
    // The last of a burst is signaled too when this connection's own buffers
    // run low, so that completions free them in time.
    const uint32_t quarter = std::max<uint32_t>(1, pool.count() / 4);
    const bool low = sendCap_ - std::min<uint32_t>(sendCap_, sendHeld()) < signalEvery ||
                     sendPool.available() < quarter;
    if (unsignaled_ + 1 >= signalEvery || sendPool.unsignaled() >= quarter || (last && low)) {
      w.send_flags = IBV_SEND_SIGNALED;
      sendPool.retireUnsignaled(unsignaled_);
      unsignaled_ = 0;
      counters_.sendsSignaled++;
    } else {
      unsignaled_++;
      sendPool.addUnsignaled();
    }
    // Only the last send of a train is solicited (docs/architecture.md).
    if (last) w.send_flags |= IBV_SEND_SOLICITED;
    w.next = last ? nullptr : &wrs[i + 1];
  }
  ibv_send_wr* bad = nullptr;
  int rc = ibv_post_send(id_->qp, wrs.data(), &bad);
  counters_.postSendCalls++;
  if (rc != 0) {
    fail("ibv_post_send: " + errnoText(rc));
    return;
  }
  auto n = static_cast<uint32_t>(sealed_.size());
  postedSends_ += n;
  counters_.sendsPosted += n;
  for (auto [idx, bytes] : sealed_)
    sendPosted_.push_back(idx);
  sealed_.clear();
  lastSent_ = std::chrono::steady_clock::now();
}

}  // namespace rdmamsg::peer
