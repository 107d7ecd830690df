// A configured peer daemon (peer.h).
#include "daemon/peer/peer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <ctime>

#include "daemon/peer/mesh.h"

namespace rdmamsg::peer {

namespace {
constexpr size_t kMinFragment = 4096;
using Clock = std::chrono::steady_clock;

// Message deadlines are seconds away: the coarse monotonic clock (a few ms
// of resolution, no system call) is precise enough and cheap per message.
Clock::time_point coarseNow() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return Clock::time_point(std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec));
}
}  // namespace

Peer::Peer(loop::EventLoop& loop, Mesh& mesh, const config::Config& cfg, config::Peer peer,
           PeerEvents& events)
    : loop_(loop),
      mesh_(mesh),
      config_(cfg),
      cfg_(std::move(peer)),
      events_(events),
      id_(nodeId(cfg_.name)),
      dialTimer_(std::make_unique<loop::Timer>(loop, [this] { dial(); })),
      tickTimer_(std::make_unique<loop::Timer>(loop, [this] { onTick(); })),
      rng_(std::random_device{}()) {}

Peer::~Peer() = default;

bool Peer::established() const {
  return conn_ != nullptr && conn_->state() == ConnState::kEstablished;
}

std::string Peer::state() const {
  if (conn_ == nullptr) return stopping_ ? "stopped" : "disconnected";
  switch (conn_->state()) {
    case ConnState::kEstablished:
      return "established";
    case ConnState::kDisconnecting:
    case ConnState::kClosed:
      return "disconnecting";
    default:
      return "connecting";
  }
}

uint64_t Peer::remoteIncarnation() const {
  return conn_ != nullptr && conn_->remote() ? conn_->remote()->incarnation : 0;
}

void Peer::start() {
  tickTimer_->arm(std::min(config_.heartbeatInterval, std::chrono::milliseconds(1000)) / 2);
  dial();
}

void Peer::shutdown() {
  stopping_ = true;
  dialTimer_->cancel();
  if (conn_ != nullptr) conn_->close("daemon stopping");
}

void Peer::dial() {
  if (stopping_ || conn_ != nullptr) return;
  attempts_++;
  conn_ = mesh_.dial(*this);
}

void Peer::scheduleDial() {
  if (stopping_ || conn_ != nullptr) return;
  // Exponential backoff with full jitter between half and all of the step.
  auto base = config_.reconnectBackoffMin.count();
  auto cap = config_.reconnectBackoffMax.count();
  long long step = base;
  for (int i = 1; i < attempts_ && step < cap; i++)
    step *= 2;
  step = std::min<long long>(step, cap);
  std::uniform_int_distribution<long long> jitter(step / 2, step);
  dialTimer_->arm(std::chrono::milliseconds(jitter(rng_)));
}

RejectReason Peer::admit(const Hello& hello, bool selfIsLower) {
  if (stopping_) return RejectReason::kShuttingDown;
  if (conn_ == nullptr) return RejectReason::kNone;
  if (conn_->state() == ConnState::kEstablished || conn_->state() == ConnState::kAccepting) {
    // A new incarnation means the peer restarted: the old connection is stale.
    if (conn_->remote() && conn_->remote()->incarnation != hello.incarnation)
      return RejectReason::kNone;
    return RejectReason::kDuplicate;
  }
  // Both ends are dialing: the connection initiated by the lower name wins.
  return selfIsLower ? RejectReason::kDuplicate : RejectReason::kNone;
}

void Peer::adopt(Connection* c) {
  if (conn_ != nullptr && conn_ != c) {
    Connection* old = conn_;
    bool wasUp = old->state() == ConnState::kEstablished;
    conn_ = nullptr;
    up_ = false;
    failAll(Status(Errc::peer_unreachable, "connection to " + name() + " replaced"));
    old->close(wasUp ? "replaced by a new connection from a restarted peer"
                     : "simultaneous dial: keeping the peer's connection");
  }
  conn_ = c;
  dialTimer_->cancel();
}

void Peer::onEstablished(Connection& c) {
  if (&c != conn_) {
    c.close("superseded");
    return;
  }
  attempts_ = 0;
  up_ = true;
  nextSeq_ = 1;
  expectedSeq_ = 1;
  counters_.connects++;
  lastError_.clear();
  spdlog::info("peer {}: established ({} side, incarnation {:x})", name(),
               c.active() ? "active" : "passive", c.remote()->incarnation);
  pump();
}

void Peer::onRejected(Connection& c, RejectReason reason) {
  if (reason == RejectReason::kDuplicate)
    spdlog::debug("peer {}: dial rejected, the peer keeps its own connection", name());
  else if (reason == RejectReason::kNone)
    spdlog::debug("peer {}: nobody listens at {} yet", name(), address().toString());
  else if (&c == conn_)
    spdlog::warn("peer {}: connection rejected: {}", name(), toString(reason));
}

void Peer::onClosed(Connection& c, const std::string& why) {
  if (&c != conn_) return;
  conn_ = nullptr;
  lastError_ = why;
  if (up_ && stopping_)
    spdlog::info("peer {}: connection closed: {}", name(), why);
  else if (up_)
    spdlog::warn("peer {}: connection lost: {}", name(), why);
  else
    spdlog::debug("peer {}: connection attempt failed: {}", name(), why);
  up_ = false;
  failAll(Status(Errc::peer_unreachable, "connection to " + name() + " lost: " + why));
  scheduleDial();
}

void Peer::onReapable(Connection& c) {
  mesh_.reap(&c);
}

void Peer::failAll(const Status& why) {
  inflight_.forEach([&](InFlight& m) {
    counters_.failed++;
    events_.outcome(m.session, m.msgId, why);
  });
  inflight_.clear();
  queue_.clear();
  queuedBytes_ = 0;
  confirms_.clear();
  reasmActive_ = reasmComplete_ = reasmDiscard_ = false;
  reasm_.clear();
  receivePaused_ = false;
  if (overLimit_) {
    overLimit_ = false;
    events_.queueDrained(*this);
  }
}

Status Peer::send(uint64_t session, uint64_t msgId, std::string_view srcService,
                  std::string_view dstService, std::span<const std::byte> payload,
                  bool& overLimit) {
  overLimit = false;
  if (!established())
    return Status(Errc::peer_unreachable, "peer " + name() + " is not connected (" + state() +
                                              (lastError_.empty() ? "" : ": " + lastError_) + ")");
  uint64_t limit = conn_->remote()->maxMessage;
  if (limit != 0 && payload.size() > limit)
    return Status(Errc::too_large, "message of " + std::to_string(payload.size()) +
                                       " bytes is over the max_message_size of " + name() + " (" +
                                       std::to_string(limit) + " bytes)");
  uint64_t seq = nextSeq_++;
  InFlight f{seq, session, msgId, coarseNow() + config_.messageTimeout, 0, {}};
  f.serviceLen = static_cast<uint8_t>(std::min(dstService.size(), sizeof f.service));
  std::memcpy(f.service, dstService.data(), f.serviceLen);
  inflight_.push_back(f);
  counters_.messagesSent++;
  counters_.bytesSent += payload.size();
  size_t offset = 0;
  bool started = false;
  if (queue_.empty() && writeConfirms() &&
      writeMessage(seq, srcService, dstService, payload, offset, started))
    return Status();
  auto rest = payload.subspan(offset);
  Queued q{seq,
           0,
           static_cast<uint32_t>(rest.size()),
           static_cast<uint8_t>(srcService.size()),
           static_cast<uint8_t>(dstService.size()),
           started,
           0};
  queue_.append(&q, sizeof q);
  queue_.append(srcService);
  queue_.append(dstService);
  queue_.append(rest);
  queuedBytes_ = queue_.size();
  if (queuedBytes_ > config_.sendQueueLimit) overLimit_ = overLimit = true;
  return Status();
}

bool Peer::writeConfirms() {
  while (!confirms_.empty() && conn_ != nullptr) {
    if (!conn_->openBatch(false)) return false;
    if (conn_->batch().room() < kConfirmRecordSize) {
      conn_->sealBatch();
      continue;
    }
    const ConfirmRange& r = confirms_.front();
    conn_->batch().addConfirm(r.first, r.last, r.errc);
    confirms_.erase(confirms_.begin());
  }
  return confirms_.empty();
}

bool Peer::writeMessage(uint64_t seq, std::string_view src, std::string_view dst,
                        std::span<const std::byte> payload, size_t& offset, bool& started) {
  Connection& c = *conn_;
  for (;;) {
    size_t room = c.messageRoom();
    if (room == 0) return false;
    size_t rest = payload.size() - offset;
    uint8_t first = started ? 0 : kFirstFragment;
    size_t whole = BatchWriter::messageSize(src.size(), dst.size(), rest, false);
    if (whole <= room) {
      c.batch().addMessage(seq, first | kLastFragment, src, dst, 0, payload.subspan(offset));
      offset = payload.size();
      started = true;
      c.requestFlush();
      return true;
    }
    bool withTotal = !started;
    size_t fixed = BatchWriter::messageSize(src.size(), dst.size(), 0, withTotal);
    if (room < fixed + kMinFragment && !c.batch().empty()) {
      c.sealBatch();
      continue;
    }
    if (room <= fixed + 8) {
      c.sealBatch();
      continue;
    }
    size_t chunk = std::min(rest, (room - fixed) & ~size_t{7});
    c.batch().addMessage(seq, first, src, dst, payload.size(), payload.subspan(offset, chunk));
    offset += chunk;
    started = true;
    c.sealBatch();
  }
}

void Peer::pump() {
  if (!established()) return;
  if (!writeConfirms()) return;
  while (!queue_.empty()) {
    Queued q;
    std::memcpy(&q, queue_.data(), sizeof q);
    const auto* p = reinterpret_cast<const char*>(queue_.data()) + sizeof q;
    std::string_view src(p, q.srcLen), dst(p + q.srcLen, q.dstLen);
    std::span<const std::byte> payload(queue_.data() + sizeof q + q.srcLen + q.dstLen, q.length);
    size_t offset = q.offset;
    bool done = writeMessage(q.seq, src, dst, payload, offset, q.started);
    if (!done) {
      q.offset = offset;
      queue_.overwrite(0, &q, sizeof q);
      break;
    }
    queue_.consume(sizeof q + q.srcLen + q.dstLen + q.length);
  }
  queuedBytes_ = queue_.size();
  if (overLimit_ && queuedBytes_ <= config_.sendQueueLimit / 2) {
    overLimit_ = false;
    events_.queueDrained(*this);
  }
  if (conn_ != nullptr) conn_->requestFlush();
}

void Peer::onWritable(Connection& c) {
  if (&c == conn_) pump();
}

// Confirmations are collected into ranges and written when the connection
// flushes (beforeFlush): one record for every message of a loop turn.
void Peer::confirm(uint64_t seq, Errc errc) {
  auto code = static_cast<uint16_t>(errc);
  if (!confirms_.empty() && confirms_.back().last + 1 == seq && confirms_.back().errc == code)
    confirms_.back().last = seq;
  else
    confirms_.push_back({seq, seq, code});
  if (conn_ != nullptr) conn_->requestFlush();
}

void Peer::beforeFlush(Connection& c) {
  if (&c == conn_) writeConfirms();
}

void Peer::settle(uint64_t first, uint64_t last, Errc errc) {
  while (!inflight_.empty() && inflight_.front().seq <= last) {
    if (inflight_.front().seq < first) {  // timed out earlier: its sender already knows
      inflight_.pop_front();
      continue;
    }
    if (errc == Errc::ok) {
      // A run of one client's messages with consecutive ids settles at once.
      const uint64_t session = inflight_.front().session, msgId = inflight_.front().msgId;
      uint64_t n = 0;
      while (!inflight_.empty() && inflight_.front().seq <= last &&
             inflight_.front().session == session && inflight_.front().msgId == msgId + n) {
        inflight_.pop_front();
        ++n;
      }
      counters_.confirmed += n;
      events_.delivered(session, msgId, n);
      continue;
    }
    InFlight m = inflight_.front();
    inflight_.pop_front();
    counters_.confirmed++;
    std::string service(m.service, m.serviceLen);
    Status st;
    if (errc == Errc::unknown_service)
      st = Status(errc, "no listener for service " + service + " on " + name());
    else if (errc == Errc::too_large)
      st = Status(errc, "message to " + service + " is over the max_message_size of " + name());
    else
      st = Status(errc, "delivery to " + service + " on " + name() + " failed");
    events_.outcome(m.session, m.msgId, st);
  }
}

bool Peer::onRecord(Connection& c, const Record& r) {
  if (&c != conn_) return true;
  switch (r.type) {
    case RecordType::kHeartbeat:
      return true;
    case RecordType::kConfirm:
      settle(r.seq, r.confirm.lastSeq, static_cast<Errc>(r.confirm.errc));
      return true;
    case RecordType::kMessage:
      return handleMessage(c, r);
  }
  return true;
}

bool Peer::handleMessage(Connection& c, const Record& r) {
  bool first = r.flags & kFirstFragment, last = r.flags & kLastFragment;
  std::span<const std::byte> payload = r.payload;
  if (first) {
    if (r.seq != expectedSeq_ || reasmActive_) {
      c.close("message out of sequence from peer");
      return false;
    }
    uint64_t total = last ? r.payload.size() : r.totalLength;
    if (!last && r.payload.size() > r.totalLength) {
      c.close("fragment longer than its announced message");
      return false;
    }
    if (total > config_.maxMessageSize) {
      // Over our limit: nothing is kept, the sender is told, the connection stays.
      if (last) {
        expectedSeq_ = r.seq + 1;
        confirm(r.seq, Errc::too_large);
        return true;
      }
      reasmActive_ = reasmDiscard_ = true;
      reasmSeq_ = r.seq;
      return true;
    }
    if (!last) {
      reasmActive_ = true;
      reasmComplete_ = reasmDiscard_ = false;
      reasmSeq_ = r.seq;
      reasmTotal_ = r.totalLength;
      reasmSrc_.assign(r.srcService);
      reasmDst_.assign(r.dstService);
      reasm_.assign(r.payload.begin(), r.payload.end());
      return true;
    }
  } else {
    if (!reasmActive_ || r.seq != reasmSeq_) {
      c.close("fragment out of sequence from peer");
      return false;
    }
    if (reasmDiscard_) {
      if (last) {
        reasmActive_ = reasmDiscard_ = false;
        expectedSeq_ = r.seq + 1;
        confirm(r.seq, Errc::too_large);
      }
      return true;
    }
    if (!reasmComplete_) {
      if (reasm_.size() + r.payload.size() > reasmTotal_) {
        c.close("fragments exceed the announced message length");
        return false;
      }
      reasm_.insert(reasm_.end(), r.payload.begin(), r.payload.end());
      if (!last) return true;
      if (reasm_.size() != reasmTotal_) {
        c.close("fragments do not add up to the announced message length");
        return false;
      }
      reasmComplete_ = true;
    }
    payload = reasm_;
  }
  std::string_view src = first ? r.srcService : std::string_view(reasmSrc_);
  std::string_view dst = first ? r.dstService : std::string_view(reasmDst_);
  Delivery d = events_.deliverIncoming(*this, src, dst, payload);
  if (d == Delivery::kCongested) {
    receivePaused_ = true;
    return false;
  }
  counters_.messagesReceived++;
  counters_.bytesReceived += payload.size();
  uint64_t seq = first ? r.seq : reasmSeq_;
  expectedSeq_ = seq + 1;
  reasmActive_ = reasmComplete_ = false;
  if (!first) reasm_.clear();
  confirm(seq, d == Delivery::kDelivered ? Errc::ok : Errc::unknown_service);
  return true;
}

void Peer::resumeReceiving() {
  if (!receivePaused_ || conn_ == nullptr) return;
  receivePaused_ = false;
  conn_->resumeReceive();
}

void Peer::onTick() {
  auto now = Clock::now();
  if (established()) {
    if (now - conn_->lastReceived() > config_.heartbeatTimeout) {
      conn_->close("no traffic from peer for " + std::to_string(config_.heartbeatTimeout.count()) +
                   " ms");
    } else if (now - conn_->lastSent() >= config_.heartbeatInterval) {
      if (conn_->openBatch(false) && conn_->batch().room() >= sizeof(RecordHeader)) {
        conn_->batch().addHeartbeat();
        counters_.heartbeatsSent++;
        conn_->requestFlush();
      }
    }
  }
  auto coarse = coarseNow();
  while (!inflight_.empty() && inflight_.front().deadline < coarse) {
    InFlight m = inflight_.front();
    inflight_.pop_front();
    counters_.failed++;
    events_.outcome(
        m.session, m.msgId,
        Status(Errc::timeout, "no delivery confirmation from " + name() + " within " +
                                  std::to_string(config_.messageTimeout.count()) + " ms"));
  }
  tickTimer_->arm(std::min(config_.heartbeatInterval, std::chrono::milliseconds(1000)) / 2);
}

}  // namespace rdmamsg::peer
