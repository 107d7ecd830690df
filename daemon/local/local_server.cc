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

}  // namespace

LocalServer::LocalServer(loop::EventLoop& loop, LocalServerConfig config, LocalHandler& handler)
    : loop_(loop),
      config_(std::move(config)),
      handler_(handler),
      listener_(config_.listener),
      acceptRetry_(loop, [this] { acceptAll(); }),
      service_(loop, loop::Phase::service, [this] { serviceSessions(); }),
      reports_(loop),
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
  const SessionId id = nextId_++;
  const uint32_t maxBody = proto::maxBodyFor(config_.maxMessageSize);
  Client& c = clients_[id];
  c.session = std::make_unique<Session>(loop_, id, std::move(fd), cred, maxBody,
                                        (maxBody - 4) / proto::kAckRangeSize, config_.helloTimeout,
                                        [this, id] { mark(id); });
  Session& s = *c.session;
  localLog().debug("{}: connected (gid {})", s.name(), cred.gid);
  // Refused by the policy: answered with ERROR at its first frame (HELLO), so
  // that the client reads why instead of a reset connection, then closed.
  if (config_.policy) {
    const config::Verdict v = config::checkConnect(*config_.policy, identityOf(s.cred()));
    if (!v) {
      refused(s, PolicyAction::connect, v);
      c.refusal = Status(Errc::permission_denied, "connect: " + v.rule + ": " + v.reason);
    }
  }
  // Edge-triggered: bytes may already be waiting; read them now.
  s.kickRead();
}

LocalServer::Client* LocalServer::find(SessionId id) const {
  if (lastFound_ != nullptr && lastFound_->session->id() == id) return lastFound_;
  auto it = clients_.find(id);
  if (it == clients_.end()) return nullptr;
  lastFound_ = const_cast<Client*>(&it->second);
  return lastFound_;
}

// --- the service phase: what sessions marked ----------------------------------------

void LocalServer::mark(SessionId id) {
  Client* c = find(id);
  if (c == nullptr || c->marked) return;
  c->marked = true;
  marked_.push_back(id);
  service_.schedule();
}

void LocalServer::serviceSessions() {
  servicing_.swap(marked_);
  for (SessionId id : servicing_) {
    Client* c = find(id);
    if (c == nullptr) continue;
    c->marked = false;
    serviceSession(*c);
  }
  servicing_.clear();
}

void LocalServer::serviceSession(Client& c) {
  Session& s = *c.session;
  if (s.helloExpired() && s.state() == Session::State::awaiting_hello) return helloTimedOut(c);
  if (s.takeWritable()) markDirty(c);
  processInput(c);
  // Frames before the end are handled first; a paused session reads its
  // end again when it resumes.
  if (s.inputEnded() && !s.closing() && !s.paused())
    beginClose(c, s.endStatus(), s.inputEnd().message());
}

void LocalServer::processInput(Client& c) {
  Session& s = *c.session;
  while (!s.closing() && !s.paused()) {
    const Result<proto::Decoded> res = proto::decodeFrame(s.input(), s.maxBody());
    if (!res) return protocolError(c, res.status());
    switch (res->kind) {
      case proto::Decoded::Kind::need_more:
        if (!s.frameRecordWaiting()) return;
        // A frame record comes between frames, never inside one.
        if (!s.input().empty()) return protocolError(c, "a frame record cut a frame");
        if (!handleFrameRecord(c)) return;
        break;
      case proto::Decoded::Kind::other_version:
        // An older client reads why in its own framing; a newer one gets the
        // protocol error in ours, as for any bad header.
        if (res->version < proto::kProtocolVersion) return versionMismatch(c, res->version);
        return protocolError(c, proto::unsupportedVersion());
      case proto::Decoded::Kind::frame:
        handleFrame(c, res->frame);
        s.consumeInput(res->consumed);
        break;
    }
  }
}

// --- requests ----------------------------------------------------------------------

void LocalServer::handleFrame(Client& c, const proto::Frame& f, const PayloadHandle* inPlace) {
  using proto::FrameKind;
  Session& s = *c.session;
  if (!c.refusal.ok()) return beginClose(c, c.refusal, "permission denied");
  if (s.state() == Session::State::awaiting_hello && f.kind != FrameKind::hello) {
    return protocolError(c, "the first frame must be HELLO");
  }
  // SHM_OFFER comes right after HELLO, or not at all.
  if (f.kind == FrameKind::shm_offer && s.state() == Session::State::offering)
    return onShmOffer(c, f);
  if (f.kind != FrameKind::hello) s.stayOnSocket();
  switch (f.kind) {
    case FrameKind::hello:
      return onHello(c, f);
    case FrameKind::reg:
      return onRegister(c, f.service);
    case FrameKind::unreg:
      return onUnregister(c, f.service);
    case FrameKind::send:
      return onSend(c, f, inPlace);
    case FrameKind::status_request:
      return onStatusRequest(c);
    case FrameKind::bye:
      return beginClose(c, Status(), "client said goodbye");
    case FrameKind::consumed:
      return onConsumed(c, f.msgId);
    case FrameKind::shm_offer:
      return protocolError(c, "SHM_OFFER must follow HELLO directly");
    case FrameKind::sub:
      return onSub(c, f);
    case FrameKind::unsub:
      return onUnsub(c, f.msgId);
    case FrameKind::pub:
      return onPub(c, f);
    case FrameKind::respond:
      return onRespond(c, f);
    case FrameKind::subscribed:
    case FrameKind::pub_ack:
    case FrameKind::msg:
    case FrameKind::reply:
    case FrameKind::welcome:
    case FrameKind::shm_accept:
    case FrameKind::hold:
    case FrameKind::resume:
    case FrameKind::registered:
    case FrameKind::deliver:
    case FrameKind::ack:
    case FrameKind::error:
    case FrameKind::status_reply:
      return protocolError(c, "frame kind is not sent by clients");
  }
}

void LocalServer::helloTimedOut(Client& c) {
  if (!c.refusal.ok()) return beginClose(c, c.refusal, "permission denied");
  beginClose(c, Status(Errc::protocol_error, "no HELLO in time"), "no HELLO in time");
}

void LocalServer::onHello(Client& c, const proto::Frame& f) {
  Session& s = *c.session;
  if (s.state() != Session::State::awaiting_hello) return protocolError(c, "HELLO sent twice");
  s.helloReceived();
  c.knownToHandler = true;
  localLog().debug("{}: hello from '{}'", s.name(), f.text);
  proto::encodeWelcome(s.outputBuffer(), config_.maxMessageSize, config_.nodeName);
  markDirty(c);
}

void LocalServer::onRegister(Client& c, std::string_view service) {
  Session& s = *c.session;
  if (!mayRegister(c, service)) return;
  Status st;
  if (s.ownsService(service)) {
    st = Status(Errc::duplicate_service,
                "service '" + std::string(service) + "' is already registered by this client");
  } else {
    st = handler_.onRegister(s.id(), service);
  }
  if (s.closing()) return;
  if (st.ok()) {
    s.addService(service);
    localLog().info("{}: registered service {}", s.name(), service);
    proto::encodeRegistered(s.outputBuffer(), service);
  } else {
    localLog().info("{}: register {} refused: {}", s.name(), service, st.toString());
    proto::encodeError(s.outputBuffer(), 0, st.code(), static_cast<uint8_t>(proto::FrameKind::reg),
                       st.message());
  }
  markDirty(c);
}

void LocalServer::onUnregister(Client& c, std::string_view service) {
  Session& s = *c.session;
  if (!s.removeService(service)) {
    localLog().debug("{}: unregister of unowned service {} ignored", s.name(), service);
    return;
  }
  localLog().info("{}: unregistered service {}", s.name(), service);
  handler_.onUnregister(s.id(), service);
}

void LocalServer::onSend(Client& c, const proto::Frame& f, const PayloadHandle* inPlace) {
  Session& s = *c.session;
  if (f.msgId == 0) {
    proto::encodeError(s.outputBuffer(), 0, Errc::bad_request,
                       static_cast<uint8_t>(proto::FrameKind::send), "message id 0 is reserved");
    return markDirty(c);
  }
  if (!maySend(c, f)) return;
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
  req.inPlace = inPlace;
  handler_.onSend(s.id(), req);
}

void LocalServer::onStatusRequest(Client& c) {
  Session& s = *c.session;
  const std::string json = handler_.onStatus(s.id());
  if (s.closing()) return;
  if (json.size() > proto::maxBodyFor(config_.maxMessageSize)) {
    proto::encodeError(s.outputBuffer(), 0, Errc::too_large,
                       static_cast<uint8_t>(proto::FrameKind::status_request),
                       "status reply exceeds the maximum frame size");
  } else {
    proto::encodeStatusReply(s.outputBuffer(), json);
  }
  markDirty(c);
}

// --- local policy ------------------------------------------------------------------

bool LocalServer::mayRegister(Client& c, std::string_view service) {
  if (!config_.policy) return true;
  Session& s = *c.session;
  const config::Verdict v = config::checkRegister(*config_.policy, identityOf(s.cred()), service);
  if (v) return true;
  refused(s, PolicyAction::reg, v);
  proto::encodeError(s.outputBuffer(), 0, Errc::permission_denied,
                     static_cast<uint8_t>(proto::FrameKind::reg), v.reason);
  markDirty(c);
  return false;
}

bool LocalServer::maySend(Client& c, const proto::Frame& f) {
  if (!config_.policy) return true;
  Session& s = *c.session;
  // A stream names the same destination message after message: the last
  // destination allowed under this policy is remembered.
  if (c.policyGeneration == policyGeneration_ && c.policyNode == f.node &&
      c.policyService == f.service)
    return true;
  const config::Verdict v =
      config::checkSend(*config_.policy, identityOf(s.cred()), f.node, f.service);
  if (v) {
    c.policyGeneration = policyGeneration_;
    c.policyNode.assign(f.node);
    c.policyService.assign(f.service);
    return true;
  }
  refused(s, PolicyAction::send, v);
  fail(s.id(), f.msgId, Status(Errc::permission_denied, v.reason));
  return false;
}

void LocalServer::refused(Session& s, PolicyAction action, const config::Verdict& v) {
  static constexpr const char* kNames[kPolicyActions] = {"connect", "register", "send", "publish",
                                                         "subscribe"};
  uint64_t* counters[kPolicyActions] = {&policyCounters_.connect, &policyCounters_.reg,
                                        &policyCounters_.send, &policyCounters_.publish,
                                        &policyCounters_.subscribe};
  const auto i = static_cast<size_t>(action);
  ++*counters[i];
  if (policyLog_[i].admit())
    localLog().warn("{}: permission denied ({}, {}): {}{}", s.name(), kNames[i], v.rule, v.reason,
                    policyLog_[i].suffix());
}

size_t LocalServer::setPolicy(std::optional<config::LocalPolicy> policy) {
  config_.policy = std::move(policy);
  ++policyGeneration_;
  if (!config_.policy) return 0;
  size_t closed = 0;
  for (SessionId id : sessionIds()) {
    Client* c = find(id);
    if (c == nullptr || !c->refusal.ok()) continue;
    Session* s = c->session.get();
    const config::Identity ident = identityOf(s->cred());
    config::Verdict v = config::checkConnect(*config_.policy, ident);
    std::string what = v ? "" : "connect: " + v.rule + ": ";
    for (const std::string& service : s->services()) {
      if (!v) break;
      v = config::checkRegister(*config_.policy, ident, service);
    }
    if (v) continue;
    if (s->state() == Session::State::awaiting_hello) {  // answered at its HELLO
      refused(*s, PolicyAction::connect, v);
      c->refusal = Status(Errc::permission_denied, what + v.reason);
      continue;
    }
    ++closed;
    ++policyCounters_.revokedSessions;
    localLog().warn("{}: closed: the new local_policy does not allow what it holds: {}{}",
                    s->name(), what, v.reason);
    beginClose(*c, Status(Errc::permission_denied, "local_policy changed: " + what + v.reason),
               "local policy changed");
  }
  return closed;
}

void LocalServer::onConsumed(Client& c, uint64_t taken) {
  if (!c.session->deliveries().consume(taken))
    return protocolError(c, "CONSUMED goes back or past the deliveries sent");
  settleReceipts(c);
  updateCongestion(c);
}

// A client of another protocol version reads why in its own framing.
void LocalServer::versionMismatch(Client& c, uint8_t version) {
  Session& s = *c.session;
  localLog().warn("{}: speaks local protocol version {}, this daemon {}: closing", s.name(),
                  version, proto::kProtocolVersion);
  proto::encodeErrorInVersion(
      s.outputBuffer(), version, Errc::protocol_error,
      "this rdmamsgd speaks local protocol version " + std::to_string(proto::kProtocolVersion) +
          ", the client version " + std::to_string(version) + ": upgrade the client library");
  beginClose(c, Status(), "protocol version");
}

void LocalServer::protocolError(Client& c, const char* reason) {
  protocolError(c, Status(Errc::protocol_error, reason));
}

void LocalServer::protocolError(Client& c, const Status& why) {
  localLog().warn("{}: protocol error: {}", c.session->name(), why.message());
  beginClose(c, why, "protocol error");
}

// --- router API ----------------------------------------------------------------------

bool LocalServer::hold(SessionId id, std::string_view node, std::string_view service) {
  Client* c = find(id);
  if (c == nullptr) return false;
  proto::encodeHold(c->session->outputBuffer(), node, service);
  markDirty(*c);
  return true;
}

bool LocalServer::resume(SessionId id, std::string_view node, std::string_view service) {
  Client* c = find(id);
  if (c == nullptr) return false;
  proto::encodeResume(c->session->outputBuffer(), node, service);
  markDirty(*c);
  return true;
}

bool LocalServer::ack(SessionId id, uint64_t msgId, uint64_t count) {
  Client* c = find(id);
  if (c == nullptr) return false;
  c->session->acks().add(msgId, count);
  markDirty(*c);
  return true;
}

bool LocalServer::fail(SessionId id, uint64_t msgId, const Status& why) {
  Client* c = find(id);
  if (c == nullptr) return false;
  const Errc code = why.ok() ? Errc::bad_request : why.code();
  proto::encodeError(c->session->outputBuffer(), msgId, code,
                     static_cast<uint8_t>(proto::FrameKind::send), why.message());
  markDirty(*c);
  return true;
}

bool LocalServer::pauseReading(SessionId id) {
  Client* c = find(id);
  if (c == nullptr) return false;
  c->session->pause(Session::kPausedByRouter);
  return true;
}

bool LocalServer::resumeReading(SessionId id) {
  Client* c = find(id);
  if (c == nullptr) return false;
  c->session->resume(Session::kPausedByRouter);
  return true;
}

size_t LocalServer::outputBytes(SessionId id) const {
  const Client* c = find(id);
  return c == nullptr ? 0 : c->session->outputBytes();
}

bool LocalServer::outputCongested(SessionId id) const {
  const Client* c = find(id);
  return c != nullptr && c->congested;
}

const PeerCred* LocalServer::peerCred(SessionId id) const {
  const Client* c = find(id);
  return c == nullptr ? nullptr : &c->session->cred();
}

std::vector<SessionId> LocalServer::sessionIds() const {
  std::vector<SessionId> ids;
  ids.reserve(clients_.size());
  for (const auto& [id, c] : clients_)
    ids.push_back(id);
  return ids;
}

// --- closing ---------------------------------------------------------------------------

bool LocalServer::closeSession(SessionId id, const Status& reason) {
  Client* c = find(id);
  if (c == nullptr) return false;
  beginClose(*c, reason, reason.ok() ? "closed by the daemon" : "closed with an error");
  return true;
}

void LocalServer::closeAll(const Status& reason) {
  for (SessionId id : sessionIds())
    closeSession(id, reason);
}

void LocalServer::beginClose(Client& c, const Status& reason, std::string_view logWhy) {
  Session& s = *c.session;
  if (s.closing()) return;
  localLog().debug("{}: disconnecting: {}{}{}", s.name(), logWhy,
                   s.writeError().ok() ? "" : "; last write failed: ", s.writeError().message());
  s.close(reason);
  s.deliveries().unconsumed([this, &s](const Receipt& r, size_t bytes) {
    trackedBytes_ -= bytes;
    reports_.consumed(s.id(), r, bytes, Errc::unknown_service);
  });
  auto it = clients_.find(s.id());
  lastFound_ = nullptr;
  graveyard_.push_back(std::move(it->second));
  clients_.erase(it);
  reaper_.schedule();  // never free a session inside its own callback
}

void LocalServer::reap() {
  std::vector<Client> dead;
  dead.swap(graveyard_);
  for (Client& c : dead) {
    if (c.knownToHandler) handler_.onSessionClosed(c.session->id());
  }
}

// --- output ----------------------------------------------------------------------------

void LocalServer::markDirty(Client& c) {
  Session& s = *c.session;
  if (s.closing()) return;
  const size_t bytes = s.outputBytes();
  if (std::max(bytes, s.unconsumedBytes()) >= config_.outputHighWatermark) c.congested = true;
  // Never stop reading because of a single maximum-size delivery.
  const size_t readStop =
      std::max(config_.outputReadStop, 2 * size_t{proto::maxBodyFor(config_.maxMessageSize)});
  if (bytes >= readStop) s.pause(Session::kPausedByOutput);
  if (c.dirty) return;
  c.dirty = true;
  dirty_.push_back(s.id());
  flush_.schedule();
}

void LocalServer::flushDirty() {
  flushing_.swap(dirty_);
  // Deliveries go out before acknowledgements: a sender that has its ack can
  // count on the message being in the listener's socket already.
  std::stable_partition(flushing_.begin(), flushing_.end(), [this](SessionId id) {
    Client* c = find(id);
    return c == nullptr || c->session->acks().empty();
  });
  for (SessionId id : flushing_) {
    Client* c = find(id);
    if (c == nullptr) continue;
    c->dirty = false;
    if (c->session->flush() == FlushResult::failed) {
      // A ring the client broke is its protocol error; a socket's is its end.
      const ShmLink* link = c->session->link();
      beginClose(*c, link != nullptr ? link->status() : Status(), "write failed");
      continue;
    }
    afterFlush(*c);
  }
  flushing_.clear();
}

void LocalServer::settleReceipts(Client& c) {
  const SessionId id = c.session->id();
  c.session->deliveries().consumed([this, id](const Receipt& r, size_t bytes) {
    trackedBytes_ -= bytes;
    reports_.consumed(id, r, bytes, Errc::ok);
  });
}

void LocalServer::afterFlush(Client& c) {
  Session& s = *c.session;
  if (s.outputBytes() < config_.outputLowWatermark && s.pausedBy(Session::kPausedByOutput))
    s.resume(Session::kPausedByOutput);
  updateCongestion(c);
}

void LocalServer::updateCongestion(Client& c) {
  Session& s = *c.session;
  if (!c.congested || std::max(s.outputBytes(), s.unconsumedBytes()) >= config_.outputLowWatermark)
    return;
  c.congested = false;
  reports_.drained(s.id());
}

}  // namespace rdmamsg::local
