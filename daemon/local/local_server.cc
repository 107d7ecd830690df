// LocalServer: accepting clients, request dispatch, the router-facing API and
// the once-per-loop-turn flush (see local_server.h).
#include "daemon/local/local_server.h"

#include "daemon/loop/counters.h"

#include <event2/event.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

#include "daemon/local/log.h"
#include "daemon/local/peer_cred.h"
#include "daemon/local/session.h"

namespace rdmamsg::local {
namespace {

constexpr auto kAcceptRetry = std::chrono::milliseconds(100);

// Indexes of LocalServer::policyLog_ and names in log lines.
enum Action : int { kConnect = 0, kRegister = 1, kSend = 2 };

}  // namespace

LocalServer::LocalServer(loop::EventLoop& loop, LocalServerConfig config, LocalHandler& handler)
    : loop_(loop),
      config_(std::move(config)),
      handler_(handler),
      listener_(config_.listener),
      acceptRetry_(loop, [this] { acceptAll(); }),
      service_(loop, loop::Phase::service, [this] { serviceSessions(); }),
      report_(loop, loop::Phase::report, [this] { report(); }),
      flush_(loop, loop::Phase::flush, [this] { flushDirty(); }),
      reaper_(loop, loop::Phase::reap, [this] { reap(); }),
      acceptEvent_(loop, listener_.fd(), EV_READ | EV_PERSIST | EV_ET,
                   [this](short) { acceptAll(); }) {
  localLog().info("listening on {} for node {} (max message {} bytes)", listener_.path(),
                  config_.nodeName, config_.maxMessageSize);
  acceptEvent_.activate(EV_READ);  // an inherited socket may already have clients waiting
}

LocalServer::~LocalServer() = default;

// --- accepting -----------------------------------------------------------------

void LocalServer::acceptAll() {
  for (;;) {
    const int fd = ::accept4(listener_.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    loop::syscalls().accepts++;
    if (fd >= 0) {
      addSession(UniqueFd(fd));
      continue;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return;
    // Out of descriptors or memory: the backlog stays and no new edge will
    // come for it, so retry on a timer.
    if (acceptLog_.admit())
      localLog().warn("accept on {} failed: {}; retrying{}", listener_.path(), std::strerror(errno),
                      acceptLog_.suffix());
    acceptRetry_.arm(kAcceptRetry);
    return;
  }
}

void LocalServer::addSession(UniqueFd fd) {
  const PeerCred cred = readPeerCred(fd.get());
  if (config_.authorize && !config_.authorize(cred)) {
    if (refuseLog_.admit())
      localLog().warn("refused connection from pid {} uid {} gid {}{}", cred.pid, cred.uid,
                      cred.gid, refuseLog_.suffix());
    return;
  }
  const SessionId id = nextId_++;
  const uint32_t maxBody = proto::maxBodyFor(config_.maxMessageSize);
  auto session = std::make_unique<Session>(loop_, id, std::move(fd), cred, maxBody,
                                           (maxBody - 4) / proto::kAckRangeSize,
                                           config_.helloTimeout, [this, id] { mark(id); });
  localLog().debug("{}: connected (gid {})", session->name(), cred.gid);
  Session& s = *session;
  sessions_.emplace(id, std::move(session));
  // Refused by the policy: answered with ERROR at its first frame (HELLO), so
  // that the client reads why instead of a reset connection, then closed.
  if (config_.policy) {
    const config::Verdict v = config::checkConnect(*config_.policy, identityOf(s.cred()));
    if (!v) {
      refused(s, kConnect, v);
      s.refusal = Status(Errc::permission_denied, "connect: " + v.rule + ": " + v.reason);
    }
  }
  // Edge-triggered: bytes may already be waiting; read them now.
  s.kickRead();
}

Session* LocalServer::find(SessionId id) const {
  if (lastFound_ != nullptr && lastFound_->id() == id) return lastFound_;
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return nullptr;
  lastFound_ = it->second.get();
  return lastFound_;
}

// --- the service phase: what sessions marked ----------------------------------------

void LocalServer::mark(SessionId id) {
  Session* s = find(id);
  if (s == nullptr || s->marked) return;
  s->marked = true;
  marked_.push_back(id);
  service_.schedule();
}

void LocalServer::serviceSessions() {
  servicing_.swap(marked_);
  for (SessionId id : servicing_) {
    Session* s = find(id);
    if (s == nullptr) continue;
    s->marked = false;
    serviceSession(*s);
  }
  servicing_.clear();
}

void LocalServer::serviceSession(Session& s) {
  if (s.helloExpired() && s.state() == Session::State::awaiting_hello) return helloTimedOut(s);
  if (s.takeWritable()) markDirty(s);
  processInput(s);
  // Frames before the end are handled first; a paused session reads its
  // end again when it resumes.
  if (s.inputEnded() && s.state() != Session::State::closing && !s.paused())
    beginClose(s, s.endStatus(), s.endReason());
}

void LocalServer::processInput(Session& s) {
  while (s.state() != Session::State::closing && !s.paused()) {
    const proto::DecodeResult res = proto::decodeFrame(s.input(), s.maxBody());
    switch (res.outcome) {
      case proto::DecodeOutcome::need_more:
        if (!s.frameRecordWaiting()) return;
        // A frame record comes between frames, never inside one.
        if (!s.input().empty()) return protocolError(s, "a frame record cut a frame");
        if (!handleFrameRecord(s)) return;
        break;
      case proto::DecodeOutcome::error:
        // An older client reads why in its own framing; other bytes are garbage.
        if (res.version >= 1 && res.version < proto::kProtocolVersion)
          return versionMismatch(s, res.version);
        return protocolError(s, res.reason);
      case proto::DecodeOutcome::frame:
        handleFrame(s, res.frame);
        s.consumeInput(res.consumed);
        break;
    }
  }
}

// --- requests ----------------------------------------------------------------------

void LocalServer::handleFrame(Session& s, const proto::Frame& f) {
  using proto::FrameKind;
  if (!s.refusal.ok()) return beginClose(s, s.refusal, "permission denied");
  if (s.state() == Session::State::awaiting_hello && f.kind != FrameKind::hello) {
    return protocolError(s, "the first frame must be HELLO");
  }
  // SHM_OFFER comes right after HELLO, or not at all.
  if (f.kind == FrameKind::shm_offer && s.offerWindowOpen()) return onShmOffer(s, f);
  if (f.kind != FrameKind::hello) s.closeOfferWindow();
  switch (f.kind) {
    case FrameKind::hello:
      return onHello(s, f);
    case FrameKind::reg:
      return onRegister(s, f.service);
    case FrameKind::unreg:
      return onUnregister(s, f.service);
    case FrameKind::send:
      return onSend(s, f);
    case FrameKind::status_request:
      return onStatusRequest(s);
    case FrameKind::bye:
      return beginClose(s, Status(), "client said goodbye");
    case FrameKind::consumed:
      return onConsumed(s, f.msgId);
    case FrameKind::shm_offer:
      return protocolError(s, "SHM_OFFER must follow HELLO directly");
    case FrameKind::welcome:
    case FrameKind::shm_accept:
    case FrameKind::hold:
    case FrameKind::resume:
    case FrameKind::registered:
    case FrameKind::deliver:
    case FrameKind::ack:
    case FrameKind::error:
    case FrameKind::status_reply:
      return protocolError(s, "frame kind is not sent by clients");
  }
}

void LocalServer::helloTimedOut(Session& s) {
  if (!s.refusal.ok()) return beginClose(s, s.refusal, "permission denied");
  beginClose(s, Status(Errc::protocol_error, "no HELLO in time"), "no HELLO in time");
}

void LocalServer::onHello(Session& s, const proto::Frame& f) {
  if (s.state() != Session::State::awaiting_hello) return protocolError(s, "HELLO sent twice");
  s.setState(Session::State::ready);
  s.knownToHandler = true;
  localLog().debug("{}: hello from '{}'", s.name(), f.text);
  proto::encodeWelcome(s.outputBuffer(), config_.maxMessageSize, config_.nodeName);
  markDirty(s);
}

void LocalServer::onRegister(Session& s, std::string_view service) {
  if (!mayRegister(s, service)) return;
  Status st;
  if (s.ownsService(service)) {
    st = Status(Errc::duplicate_service,
                "service '" + std::string(service) + "' is already registered by this client");
  } else {
    st = handler_.onRegister(s.id(), service);
  }
  if (s.state() == Session::State::closing) return;
  if (st.ok()) {
    s.addService(service);
    localLog().info("{}: registered service {}", s.name(), service);
    proto::encodeRegistered(s.outputBuffer(), service);
  } else {
    localLog().info("{}: register {} refused: {}", s.name(), service, st.toString());
    proto::encodeError(s.outputBuffer(), 0, st.code(), static_cast<uint8_t>(proto::FrameKind::reg),
                       st.message());
  }
  markDirty(s);
}

void LocalServer::onUnregister(Session& s, std::string_view service) {
  if (!s.removeService(service)) {
    localLog().debug("{}: unregister of unowned service {} ignored", s.name(), service);
    return;
  }
  localLog().info("{}: unregistered service {}", s.name(), service);
  handler_.onUnregister(s.id(), service);
}

void LocalServer::onSend(Session& s, const proto::Frame& f) {
  if (f.msgId == 0) {
    proto::encodeError(s.outputBuffer(), 0, Errc::bad_request,
                       static_cast<uint8_t>(proto::FrameKind::send), "message id 0 is reserved");
    return markDirty(s);
  }
  if (!maySend(s, f)) return;
  if (f.payload.size() > config_.maxMessageSize) {
    fail(s.id(), f.msgId,
         Status(Errc::too_large, "message of " + std::to_string(f.payload.size()) +
                                     " bytes exceeds the maximum of " +
                                     std::to_string(config_.maxMessageSize)));
    return;
  }
  if (!f.otherService.empty() && !s.ownsService(f.otherService)) {
    fail(s.id(), f.msgId,
         Status(Errc::bad_request, "sender service '" + std::string(f.otherService) +
                                       "' is not registered by this client"));
    return;
  }
  SendRequest req;
  req.msgId = f.msgId;
  req.node = f.node;
  req.service = f.service;
  req.fromService = f.otherService.empty() ? s.defaultService() : f.otherService;
  req.payload = f.payload;
  req.inPlace = inPlace_;
  handler_.onSend(s.id(), req);
}

void LocalServer::onStatusRequest(Session& s) {
  const std::string json = handler_.onStatus(s.id());
  if (s.state() == Session::State::closing) return;
  if (json.size() > proto::maxBodyFor(config_.maxMessageSize)) {
    proto::encodeError(s.outputBuffer(), 0, Errc::too_large,
                       static_cast<uint8_t>(proto::FrameKind::status_request),
                       "status reply exceeds the maximum frame size");
  } else {
    proto::encodeStatusReply(s.outputBuffer(), json);
  }
  markDirty(s);
}

// --- local policy ------------------------------------------------------------------

bool LocalServer::mayRegister(Session& s, std::string_view service) {
  if (!config_.policy) return true;
  const config::Verdict v = config::checkRegister(*config_.policy, identityOf(s.cred()), service);
  if (v) return true;
  refused(s, kRegister, v);
  proto::encodeError(s.outputBuffer(), 0, Errc::permission_denied,
                     static_cast<uint8_t>(proto::FrameKind::reg), v.reason);
  markDirty(s);
  return false;
}

bool LocalServer::maySend(Session& s, const proto::Frame& f) {
  if (!config_.policy) return true;
  // A stream names the same destination message after message: the last
  // destination allowed under this policy is remembered.
  if (s.policyGeneration == policyGeneration_ && s.policyNode == f.node &&
      s.policyService == f.service)
    return true;
  const config::Verdict v =
      config::checkSend(*config_.policy, identityOf(s.cred()), f.node, f.service);
  if (v) {
    s.policyGeneration = policyGeneration_;
    s.policyNode.assign(f.node);
    s.policyService.assign(f.service);
    return true;
  }
  refused(s, kSend, v);
  fail(s.id(), f.msgId, Status(Errc::permission_denied, v.reason));
  return false;
}

void LocalServer::refused(Session& s, int action, const config::Verdict& v) {
  static constexpr const char* kNames[] = {"connect", "register", "send"};
  uint64_t* counters[] = {&policyCounters_.connect, &policyCounters_.reg, &policyCounters_.send};
  ++*counters[action];
  if (policyLog_[action].admit())
    localLog().warn("{}: permission denied ({}, {}): {}{}", s.name(), kNames[action], v.rule,
                    v.reason, policyLog_[action].suffix());
}

size_t LocalServer::setPolicy(std::optional<config::LocalPolicy> policy) {
  config_.policy = std::move(policy);
  ++policyGeneration_;
  if (!config_.policy) return 0;
  size_t closed = 0;
  for (SessionId id : sessionIds()) {
    Session* s = find(id);
    if (s == nullptr || !s->refusal.ok()) continue;
    const config::Identity ident = identityOf(s->cred());
    config::Verdict v = config::checkConnect(*config_.policy, ident);
    std::string what = v ? "" : "connect: " + v.rule + ": ";
    for (const std::string& service : s->services()) {
      if (!v) break;
      v = config::checkRegister(*config_.policy, ident, service);
    }
    if (v) continue;
    if (s->state() == Session::State::awaiting_hello) {  // answered at its HELLO
      refused(*s, kConnect, v);
      s->refusal = Status(Errc::permission_denied, what + v.reason);
      continue;
    }
    ++closed;
    ++policyCounters_.revokedSessions;
    localLog().warn("{}: closed: the new local_policy does not allow what it holds: {}{}",
                    s->name(), what, v.reason);
    beginClose(*s, Status(Errc::permission_denied, "local_policy changed: " + what + v.reason),
               "local policy changed");
  }
  return closed;
}

void LocalServer::onConsumed(Session& s, uint64_t taken) {
  if (!s.consume(taken)) return protocolError(s, "CONSUMED goes back or past the deliveries sent");
  settleReceipts(s);
  updateCongestion(s);
}

// A client of another protocol version reads why in its own framing.
void LocalServer::versionMismatch(Session& s, uint8_t version) {
  localLog().warn("{}: speaks local protocol version {}, this daemon {}: closing", s.name(),
                  version, proto::kProtocolVersion);
  proto::encodeErrorInVersion(
      s.outputBuffer(), version, Errc::protocol_error,
      "this rdmamsgd speaks local protocol version " + std::to_string(proto::kProtocolVersion) +
          ", the client version " + std::to_string(version) + ": upgrade the client library");
  beginClose(s, Status(), "protocol version");
}

void LocalServer::protocolError(Session& s, const char* reason) {
  localLog().warn("{}: protocol error: {}", s.name(), reason);
  beginClose(s, Status(Errc::protocol_error, reason), "protocol error");
}

// --- router API ----------------------------------------------------------------------

bool LocalServer::hold(SessionId id, std::string_view node, std::string_view service) {
  Session* s = find(id);
  if (s == nullptr) return false;
  proto::encodeHold(s->outputBuffer(), node, service);
  markDirty(*s);
  return true;
}

bool LocalServer::resume(SessionId id, std::string_view node, std::string_view service) {
  Session* s = find(id);
  if (s == nullptr) return false;
  proto::encodeResume(s->outputBuffer(), node, service);
  markDirty(*s);
  return true;
}

bool LocalServer::ack(SessionId id, uint64_t msgId, uint64_t count) {
  Session* s = find(id);
  if (s == nullptr) return false;
  s->queueAcks(msgId, count);
  markDirty(*s);
  return true;
}

bool LocalServer::fail(SessionId id, uint64_t msgId, const Status& why) {
  Session* s = find(id);
  if (s == nullptr) return false;
  const Errc code = why.ok() ? Errc::bad_request : why.code();
  proto::encodeError(s->outputBuffer(), msgId, code, static_cast<uint8_t>(proto::FrameKind::send),
                     why.message());
  markDirty(*s);
  return true;
}

bool LocalServer::pauseReading(SessionId id) {
  Session* s = find(id);
  if (s == nullptr) return false;
  s->pause(Session::kPausedByRouter);
  return true;
}

bool LocalServer::resumeReading(SessionId id) {
  Session* s = find(id);
  if (s == nullptr) return false;
  s->resume(Session::kPausedByRouter);
  return true;
}

size_t LocalServer::outputBytes(SessionId id) const {
  const Session* s = find(id);
  return s == nullptr ? 0 : s->outputBytes();
}

bool LocalServer::outputCongested(SessionId id) const {
  const Session* s = find(id);
  return s != nullptr && s->congested;
}

const PeerCred* LocalServer::peerCred(SessionId id) const {
  const Session* s = find(id);
  return s == nullptr ? nullptr : &s->cred();
}

std::vector<SessionId> LocalServer::sessionIds() const {
  std::vector<SessionId> ids;
  ids.reserve(sessions_.size());
  for (const auto& [id, s] : sessions_)
    ids.push_back(id);
  return ids;
}

// --- closing ---------------------------------------------------------------------------

bool LocalServer::closeSession(SessionId id, const Status& reason) {
  Session* s = find(id);
  if (s == nullptr) return false;
  beginClose(*s, reason, reason.ok() ? "closed by the daemon" : "closed with an error");
  return true;
}

void LocalServer::closeAll(const Status& reason) {
  for (SessionId id : sessionIds())
    closeSession(id, reason);
}

void LocalServer::beginClose(Session& s, const Status& reason, std::string_view logWhy) {
  if (s.state() == Session::State::closing) return;
  localLog().debug("{}: disconnecting: {}{}{}", s.name(), logWhy, s.lastErrno() ? ": " : "",
                   s.lastErrno() ? std::strerror(s.lastErrno()) : "");
  s.encodePendingAcks();  // acks already earned go out before the closing error
  s.setState(Session::State::closing);
  s.stopEvents();
  // Best effort, never waiting: what is queued (into the ring, unless the
  // client broke it), then why — on the socket, the control channel, when
  // the frames go through shared memory.
  if (s.sharedMemory() != nullptr) {
    if (s.ringBroken()) s.outputBuffer().clear();
    s.flush();
    s.outputBuffer().clear();
    if (!reason.ok()) s.sayOnSocket(reason);
  } else {
    if (!reason.ok()) proto::encodeError(s.outputBuffer(), 0, reason.code(), 0, reason.message());
    s.flush();
  }
  s.unconsumed([this, &s](const Receipt& r, size_t bytes) {
    trackedBytes_ -= bytes;
    consumedReports_.push_back({s.id(), r, bytes, Errc::unknown_service});
  });
  if (!consumedReports_.empty()) report_.schedule();
  auto it = sessions_.find(s.id());
  lastFound_ = nullptr;
  graveyard_.push_back(std::move(it->second));
  sessions_.erase(it);
  reaper_.schedule();  // never free a session inside its own callback
}

void LocalServer::reap() {
  std::vector<std::unique_ptr<Session>> dead;
  dead.swap(graveyard_);
  for (auto& s : dead) {
    if (s->knownToHandler) handler_.onSessionClosed(s->id());
  }
}

// --- output ----------------------------------------------------------------------------

void LocalServer::markDirty(Session& s) {
  if (s.state() == Session::State::closing) return;
  const size_t bytes = s.outputBytes();
  if (std::max(bytes, s.unconsumedBytes()) >= config_.outputHighWatermark) s.congested = true;
  // Never stop reading because of a single maximum-size delivery.
  const size_t readStop =
      std::max(config_.outputReadStop, 2 * size_t{proto::maxBodyFor(config_.maxMessageSize)});
  if (bytes >= readStop) s.pause(Session::kPausedByOutput);
  if (s.dirty) return;
  s.dirty = true;
  dirty_.push_back(s.id());
  flush_.schedule();
}

void LocalServer::flushDirty() {
  flushing_.swap(dirty_);
  // Deliveries go out before acknowledgements: a sender that has its ack can
  // count on the message being in the listener's socket already.
  std::stable_partition(flushing_.begin(), flushing_.end(), [this](SessionId id) {
    Session* s = find(id);
    return s == nullptr || !s->hasPendingAcks();
  });
  for (SessionId id : flushing_) {
    Session* s = find(id);
    if (s == nullptr) continue;
    s->dirty = false;
    if (s->flush() == Session::FlushResult::failed) {
      // A ring the client broke is its protocol error; a socket's is its end.
      beginClose(*s, s->ringBroken() ? s->sharedMemory()->status() : Status(), "write failed");
      continue;
    }
    afterFlush(*s);
  }
  flushing_.clear();
}

void LocalServer::settleReceipts(Session& s) {
  s.consumed([this, &s](const Receipt& r, size_t bytes) {
    trackedBytes_ -= bytes;
    consumedReports_.push_back({s.id(), r, bytes, Errc::ok});
  });
  if (!consumedReports_.empty()) report_.schedule();
}

// The report phase: the router hears what the local layer learned this turn.
void LocalServer::report() {
  reporting_.swap(consumedReports_);
  for (const Consumed& c : reporting_)
    if (consumed_) consumed_(c.listener, c.receipt, c.bytes, c.errc);
  reporting_.clear();
  drainedReporting_.swap(drainedReports_);
  for (SessionId id : drainedReporting_)
    if (drained_) drained_(id);
  drainedReporting_.clear();
}

void LocalServer::afterFlush(Session& s) {
  if (s.outputBytes() < config_.outputLowWatermark && s.pausedBy(Session::kPausedByOutput))
    s.resume(Session::kPausedByOutput);
  updateCongestion(s);
}

void LocalServer::updateCongestion(Session& s) {
  if (!s.congested || std::max(s.outputBytes(), s.unconsumedBytes()) >= config_.outputLowWatermark)
    return;
  s.congested = false;
  drainedReports_.push_back(s.id());
  report_.schedule();
}

}  // namespace rdmamsg::local
