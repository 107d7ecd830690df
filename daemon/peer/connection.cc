// One RDMA connection to a peer daemon (connection.h).
#include "daemon/peer/connection.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <system_error>

namespace rdmamsg::peer {

namespace {

constexpr uint32_t kSignalEvery = 16;
constexpr uint64_t kSendTag = 1ULL << 32;
constexpr uint64_t kRecvTag = 2ULL << 32;
constexpr uint64_t kBeaconTag = 3ULL << 32;
constexpr auto kFlushWait = std::chrono::seconds(2);

std::string errnoText(int e) {
  return std::error_code(e, std::generic_category()).message();
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
    case ConnState::kEstablished:
      return "established";
    case ConnState::kDisconnecting:
      return "disconnecting";
    case ConnState::kClosed:
      return "closed";
  }
  return "?";
}

Connection::Connection(loop::EventLoop& loop, ConnectionOwner& owner, const ConnParams& params,
                       DeviceFor devices, std::string name)
    : loop_(loop),
      owner_(owner),
      params_(params),
      devices_(std::move(devices)),
      name_(std::move(name)),
      connectTimer_(std::make_unique<loop::Timer>(
          loop,
          [this] {
            fail("connection not established within " +
                 std::to_string(params_.connectTimeout.count()) + " ms");
          })),
      closeTimer_(std::make_unique<loop::Timer>(
          loop,
          [this] {
            spdlog::warn("peer {}: flushed work requests did not all return; closing anyway",
                         name_);
            postedSends_ = postedRecvs_ = 0;
            disconnected_ = true;
            maybeFinishClose();
          })),
      flushLater_(std::make_unique<loop::Deferred>(loop, [this] { flush(); })) {
  lastSent_ = lastReceived_ = std::chrono::steady_clock::now();
}

Connection::~Connection() {
  if (qpCreated_) {
    device_->detach(id_->qp->qp_num);
    rdma_destroy_qp(id_);
  }
  if (id_ != nullptr) rdma_destroy_id(id_);
}

namespace {
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

// The one place a connection changes state: every edge is logged and checked.
void Connection::setState(ConnState s) {
  if (s == state_) return;
  if (!edgeAllowed(state_, s)) {
    spdlog::critical("peer {}: invalid connection state change {} -> {}", name_, toString(state_),
                     toString(s));
    std::abort();
  }
  spdlog::info("peer {}: {} -> {}", name_, toString(state_), toString(s));
  state_ = s;
}

bool Connection::startActive(rdma_event_channel* channel, const sockaddr* src,
                             const sockaddr* dst) {
  active_ = true;
  if (rdma_create_id(channel, &id_, static_cast<rdma::CmHandler*>(this), RDMA_PS_TCP) != 0) {
    fail("rdma_create_id: " + errnoText(errno));
    return false;
  }
  connectTimer_->arm(params_.connectTimeout);
  setState(ConnState::kResolvingAddress);
  if (rdma_resolve_addr(id_, const_cast<sockaddr*>(src), const_cast<sockaddr*>(dst), 2000) != 0) {
    fail("rdma_resolve_addr: " + errnoText(errno));
    return false;
  }
  return true;
}

bool Connection::accept(rdma_cm_id* id, const Hello& remote) {
  id_ = id;
  id_->context = static_cast<rdma::CmHandler*>(this);
  remote_ = remote;
  connectTimer_->arm(params_.connectTimeout);
  setState(ConnState::kAccepting);
  if (!createQp(id_)) return false;
  rdma_conn_param p{};
  p.private_data = &params_.hello;
  p.private_data_len = sizeof(Hello);
  p.responder_resources = 0;
  p.initiator_depth = 0;
  p.rnr_retry_count = 7;
  if (rdma_accept(id_, &p) != 0) {
    fail("rdma_accept: " + errnoText(errno));
    return false;
  }
  return true;
}

bool Connection::createQp(rdma_cm_id* id) {
  try {
    device_ = devices_(id->verbs);
    if (device_ == nullptr) {
      fail("no RDMA device resources");
      return false;
    }
    recvPool_ = std::make_unique<rdma::BufferPool>(device_->pd(), params_.bufferSize,
                                                   params_.recvBuffers, IBV_ACCESS_LOCAL_WRITE);
    sendPool_ = std::make_unique<rdma::BufferPool>(device_->pd(), params_.bufferSize,
                                                   params_.sendBuffers, 0);
  } catch (const std::exception& e) {
    fail(std::string("buffers: ") + e.what());
    return false;
  }
  ibv_qp_init_attr a{};
  a.send_cq = device_->cq();
  a.recv_cq = device_->cq();
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = params_.sendBuffers + 1;  // + the teardown beacon
  a.cap.max_recv_wr = params_.recvBuffers;
  a.cap.max_send_sge = 1;
  a.cap.max_recv_sge = 1;
  a.sq_sig_all = 0;
  if (rdma_create_qp(id, device_->pd(), &a) != 0) {
    fail("rdma_create_qp: " + errnoText(errno));
    return false;
  }
  qpCreated_ = true;
  device_->attach(id->qp->qp_num, this);
  // Receive buffers are in place before the connection is requested or accepted.
  return postReceives(0, params_.recvBuffers);
}

bool Connection::postReceives(uint32_t first, uint32_t n) {
  std::vector<ibv_recv_wr> wrs(n);
  std::vector<ibv_sge> sges(n);
  for (uint32_t i = 0; i < n; i++) {
    uint32_t idx = first + i;
    sges[i] = {recvPool_->addr(idx), static_cast<uint32_t>(params_.bufferSize), recvPool_->lkey()};
    wrs[i].wr_id = kRecvTag | idx;
    wrs[i].sg_list = &sges[i];
    wrs[i].num_sge = 1;
    wrs[i].next = i + 1 < n ? &wrs[i + 1] : nullptr;
  }
  ibv_recv_wr* bad = nullptr;
  if (int rc = ibv_post_recv(id_->qp, wrs.data(), &bad); rc != 0) {
    fail("ibv_post_recv: " + errnoText(rc));
    return false;
  }
  postedRecvs_ += n;
  counters_.recvsPosted += n;
  counters_.postRecvCalls++;
  return true;
}

void Connection::repostPending() {
  if (repost_.empty() || state_ != ConnState::kEstablished) return;
  ibv_recv_wr wrs[64];
  ibv_sge sges[64];
  size_t done = 0;
  while (done < repost_.size()) {
    size_t n = std::min<size_t>(64, repost_.size() - done);
    for (size_t i = 0; i < n; i++) {
      uint32_t idx = repost_[done + i];
      sges[i] = {recvPool_->addr(idx), static_cast<uint32_t>(params_.bufferSize),
                 recvPool_->lkey()};
      wrs[i].wr_id = kRecvTag | idx;
      wrs[i].sg_list = &sges[i];
      wrs[i].num_sge = 1;
      wrs[i].next = i + 1 < n ? &wrs[i + 1] : nullptr;
    }
    ibv_recv_wr* bad = nullptr;
    if (int rc = ibv_post_recv(id_->qp, wrs, &bad); rc != 0) {
      fail("ibv_post_recv: " + errnoText(rc));
      return;
    }
    postedRecvs_ += n;
    counters_.recvsPosted += n;
    counters_.postRecvCalls++;
    owedCredits_ += static_cast<uint32_t>(n);
    done += n;
  }
  repost_.clear();
}

void Connection::onCmEvent(const rdma::CmEvent& e) {
  if (state_ == ConnState::kClosed) return;
  switch (e.type) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      setState(ConnState::kResolvingRoute);
      if (rdma_resolve_route(id_, 2000) != 0) fail("rdma_resolve_route: " + errnoText(errno));
      return;
    case RDMA_CM_EVENT_ROUTE_RESOLVED: {
      if (!createQp(id_)) return;
      rdma_conn_param p{};
      p.private_data = &params_.hello;
      p.private_data_len = sizeof(Hello);
      p.retry_count = 7;
      p.rnr_retry_count = 7;
      setState(ConnState::kConnecting);
      if (rdma_connect(id_, &p) != 0) fail("rdma_connect: " + errnoText(errno));
      return;
    }
    case RDMA_CM_EVENT_ESTABLISHED: {
      if (active_) {
        remote_ = decodeHello(e.privateData.data(), e.privateData.size());
        if (!remote_ || remote_->version != kProtocolVersion) {
          fail("peer answered with an invalid handshake");
          return;
        }
      }
      credits_ = remote_->bufferCount;
      batchCapacity_ = std::min<size_t>(params_.bufferSize, remote_->bufferSize);
      if (batchCapacity_ < sizeof(BatchHeader) + 256) {
        fail("peer's receive buffers are too small");
        return;
      }
      connectTimer_->cancel();
      setState(ConnState::kEstablished);
      lastSent_ = lastReceived_ = std::chrono::steady_clock::now();
      owner_.onEstablished(*this);
      return;
    }
    case RDMA_CM_EVENT_REJECTED: {
      auto h = decodeHello(e.privateData.data(), e.privateData.size());
      RejectReason reason = h ? h->reason : RejectReason::kNone;
      owner_.onRejected(*this, reason);
      disconnected_ = true;
      fail(h ? std::string("rejected by peer: ") + toString(reason)
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
        rdma_disconnect(id_);  // our QP to error (flush) and the reply to the peer
        setState(ConnState::kDisconnecting);
        postBeacon();
        closeTimer_->arm(kFlushWait);
        owner_.onClosed(*this, closeReason_);
      }
      maybeFinishClose();
      return;
    default:
      return;  // TIMEWAIT_EXIT, ADDR_CHANGE, ...: nothing to do
  }
}

void Connection::fail(const std::string& why) {
  close(why);
}

void Connection::close(const std::string& why) {
  if (state_ == ConnState::kDisconnecting || state_ == ConnState::kClosed) return;
  closeReason_ = why;
  bool wasUp = state_ == ConnState::kEstablished;
  connectTimer_->cancel();
  if (qpCreated_) {
    bool connected = state_ == ConnState::kEstablished || state_ == ConnState::kAccepting ||
                     state_ == ConnState::kConnecting;
    if (!connected || disconnected_ || rdma_disconnect(id_) != 0) {
      // Never connected (or the CM refuses): flush the QP by hand.
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
  owner_.onClosed(*this, why);
  maybeFinishClose();
}

// After the QP went to error: a signaled request posted behind every other
// one. Its (flushed) completion means all earlier sends are done, including
// unsignaled ones that completed without a completion entry.
void Connection::postBeacon() {
  if (!qpCreated_ || beaconPosted_) return;
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
  closeTimer_->cancel();
  setState(ConnState::kClosed);
  owner_.onReapable(*this);
}

void Connection::onCompletion(const ibv_wc& wc) {
  if (wc.wr_id == kBeaconTag) {
    postedSends_ = 0;
    maybeFinishClose();
    return;
  }
  auto idx = static_cast<uint32_t>(wc.wr_id & 0xffffffff);
  bool isSend = (wc.wr_id & ~0xffffffffULL) == kSendTag;
  if (wc.status != IBV_WC_SUCCESS) {
    if (isSend) {
      onSendDone(idx);
    } else {
      postedRecvs_--;
    }
    // A flushed request only says that the QP went to error; the cause comes
    // with its own event (a CM event, or the first failed request).
    if (wc.status != IBV_WC_WR_FLUSH_ERR)
      fail(std::string(isSend ? "send" : "receive") + " failed: " + ibv_wc_status_str(wc.status));
    else if (state_ == ConnState::kEstablished)
      fail("queue pair in error (work requests flushed)");
    maybeFinishClose();
    return;
  }
  if (isSend) {
    onSendDone(idx);
    owner_.onWritable(*this);
  } else {
    postedRecvs_--;
    onRecvDone(idx, wc.byte_len);
  }
}

void Connection::onSendDone(uint32_t index) {
  // A completion frees its buffer and every unsignaled one posted before it.
  uint32_t n = params_.sendBuffers;
  uint32_t freed = (index + n - sendTail_) % n + 1;
  if (freed > postedSends_) freed = postedSends_;
  sendTail_ = (sendTail_ + freed) % n;
  sendUsed_ -= freed;
  postedSends_ -= freed;
}

void Connection::onRecvDone(uint32_t index, uint32_t bytes) {
  lastReceived_ = std::chrono::steady_clock::now();
  counters_.batchesReceived++;
  received_.push_back({index, bytes, 0, false});
  processReceived();
}

void Connection::processReceived() {
  uint32_t creditsBefore = credits_;
  while (!paused_ && !received_.empty() && state_ == ConnState::kEstablished) {
    Received& r = received_.front();
    BatchReader reader({recvPool_->at(r.index), r.bytes});
    if (!reader.open()) {
      fail("malformed batch from peer");
      return;
    }
    if (!r.creditsTaken) {
      credits_ += reader.credits();
      r.creditsTaken = true;
    }
    Record rec;
    uint16_t i = 0;
    int rc;
    while ((rc = reader.next(rec)) == 1) {
      if (i++ < r.nextRecord) continue;
      if (!owner_.onRecord(*this, rec)) {
        r.nextRecord = static_cast<uint16_t>(i - 1);
        paused_ = true;
        break;
      }
    }
    if (paused_) break;
    if (rc < 0) {
      fail("malformed record from peer");
      return;
    }
    repost_.push_back(r.index);
    received_.pop_front();
  }
  if (!repost_.empty()) flushLater_->schedule();
  if (credits_ > creditsBefore) owner_.onWritable(*this);
}

void Connection::resumeReceive() {
  if (!paused_) return;
  paused_ = false;
  processReceived();
}

bool Connection::openBatch(bool dataRecord) {
  if (state_ != ConnState::kEstablished) return false;
  if (open_) return !dataRecord || !openOnReserve_;
  bool bufferFree = sendUsed_ < params_.sendBuffers;
  uint32_t need = dataRecord ? 2 : 1;  // one credit stays for credit returns
  if (!bufferFree || credits_ < need) {
    if (dataRecord) counters_.creditStalls++;
    return false;
  }
  credits_--;
  openOnReserve_ = credits_ == 0;
  uint32_t idx = (sendHead_ + static_cast<uint32_t>(sealed_.size())) % params_.sendBuffers;
  sendUsed_++;
  writer_.reset(sendPool_->at(idx), batchCapacity_);
  open_ = true;
  flushLater_->schedule();
  return true;
}

size_t Connection::messageRoom() {
  if (!openBatch(true)) return 0;
  return writer_.room();
}

void Connection::sealBatch() {
  if (!open_) return;
  uint32_t idx = (sendHead_ + static_cast<uint32_t>(sealed_.size())) % params_.sendBuffers;
  auto bytes = static_cast<uint32_t>(writer_.finish(owedCredits_));
  owedCredits_ = 0;
  sealed_.emplace_back(idx, bytes);
  open_ = false;
}

bool Connection::wantsCreditReturn() const {
  return owedCredits_ >= std::max<uint32_t>(1, params_.recvBuffers / 4);
}

void Connection::requestFlush() {
  flushLater_->schedule();
}

void Connection::flush() {
  if (state_ != ConnState::kEstablished) return;
  owner_.beforeFlush(*this);
  repostPending();
  if (!open_ && sealed_.empty() && wantsCreditReturn()) openBatch(false);  // a credit-only batch
  sealBatch();
  if (sealed_.empty()) return;
  std::vector<ibv_send_wr>& wrs = wrScratch_;
  std::vector<ibv_sge>& sges = sgeScratch_;
  wrs.resize(sealed_.size());
  sges.resize(sealed_.size());
  uint32_t signalEvery = std::min(kSignalEvery, std::max<uint32_t>(1, params_.sendBuffers / 2));
  for (size_t i = 0; i < sealed_.size(); i++) {
    auto [idx, bytes] = sealed_[i];
    sges[i] = {sendPool_->addr(idx), bytes, sendPool_->lkey()};
    ibv_send_wr& w = wrs[i];
    w = ibv_send_wr{};
    w.wr_id = kSendTag | idx;
    w.sg_list = &sges[i];
    w.num_sge = 1;
    w.opcode = IBV_WR_SEND;
    // Selective signaling: every signalEvery-th send, and the last of a
    // burst when free buffers run low, so that completions free them in time.
    bool low = params_.sendBuffers - sendUsed_ < signalEvery;
    if (++unsignaled_ >= signalEvery || (low && i + 1 == sealed_.size())) {
      w.send_flags = IBV_SEND_SIGNALED;
      unsignaled_ = 0;
      counters_.sendsSignaled++;
    }
    w.next = i + 1 < sealed_.size() ? &wrs[i + 1] : nullptr;
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
  sendHead_ = (sendHead_ + n) % params_.sendBuffers;
  sealed_.clear();
  lastSent_ = std::chrono::steady_clock::now();
}

}  // namespace rdmamsg::peer
