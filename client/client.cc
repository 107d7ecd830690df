// librdmamsg: connection, buffered I/O and request/reply bookkeeping behind
// rdmamsg::Client (see include/rdmamsg/client.h).
#include "rdmamsg/client.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "client/client_impl.h"
#include "common/fd_passing.h"
#include "common/idle_strategy.h"

namespace rdmamsg {
namespace {

using Clock = std::chrono::steady_clock;
using detail::assignIfChanged;
using detail::kReadChunk;
using proto::FrameKind;

constexpr size_t kWriteThreshold = 64 * 1024;  // send() writes once this much is queued
constexpr size_t kWriteBlockLimit = 4u << 20;  // send() waits for the socket above this
constexpr char kDefaultSocket[] = "/run/rdmamsg/rdmamsgd.sock";
// A client that spins on the rings (adaptive, busy) looks at its socket this
// often for a closing ERROR or its end (one recv(2)); a sleeping one polls it.
constexpr auto kSocketLook = std::chrono::milliseconds(1);

using idle::cpuRelax;

Status errnoStatus(Errc code, const std::string& what, int err) {
  return Status(code, what + ": " + std::strerror(err));
}

// ConnectOptions::idleStrategy, or RDMAMSG_IDLE when set.
Result<IdleStrategy> idleStrategyFor(const ConnectOptions& opts) {
  const char* env = std::getenv("RDMAMSG_IDLE");
  if (env == nullptr || *env == '\0') return opts.idleStrategy;
  if (std::optional<IdleStrategy> s = parseIdleStrategy(env)) return *s;
  return Status(Errc::bad_request,
                "RDMAMSG_IDLE=" + std::string(env) + " is not sleep, adaptive or busy");
}

bool sharedMemoryWanted(const ConnectOptions& opts) {
  const char* env = std::getenv("RDMAMSG_SHM");
  return opts.sharedMemory && !(env != nullptr && std::string_view(env) == "0");
}

Status checkName(std::string_view kind, std::string_view name) {
  if (proto::isValidName(name)) return {};
  return Status(Errc::bad_request, "invalid " + std::string(kind) + " name '" + std::string(name) +
                                       "' (1-63 characters of A-Z a-z 0-9 . _ -)");
}

}  // namespace

// The public enum has idle::Strategy's values (common/idle_strategy.h).
const char* toString(IdleStrategy s) {
  return idle::toString(static_cast<idle::Strategy>(s));
}

std::optional<IdleStrategy> parseIdleStrategy(std::string_view text) {
  if (std::optional<idle::Strategy> s = idle::parse(text)) return static_cast<IdleStrategy>(*s);
  return std::nullopt;
}

// --- I/O ---------------------------------------------------------------------------

void Client::Impl::writeSome() {
  if (shmInUse) return writeRing();
  while (!out.empty() && conn.ok()) {
    ++io.socketWrites;
    const ssize_t n = ::send(fd.get(), out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) {
      out.consume(static_cast<size_t>(n));
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      break;
    } else if (errno != EINTR) {
      const int err = errno;
      // A daemon that closed the connection may have said why first (an
      // ERROR such as shutting_down): that is the reason, not the write.
      readSome();
      lose(errnoStatus(Errc::io_error, "write to rdmamsgd", err));
    }
  }
}

void Client::Impl::readSome() {
  if (shmInUse) return readRing();
  readSocket(in);
}

void Client::Impl::readSocket(ByteBuffer& into) {
  while (conn.ok()) {
    auto room = into.prepare(kReadChunk);
    ++io.socketReads;
    const ssize_t n = ::recv(fd.get(), room.data(), room.size(), MSG_DONTWAIT);
    if (n > 0) {
      into.commit(static_cast<size_t>(n));
      parseInput(into);
    } else if (n == 0) {
      lose(Status(Errc::not_connected, "rdmamsgd closed the connection"));
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      break;
    } else if (errno != EINTR) {
      lose(errnoStatus(Errc::io_error, "read from rdmamsgd", errno));
    }
  }
}

// One frame record (or payload record) of `size` bytes, filled by `fill`,
// committed and announced: false when the ring has no room for it now (or
// the ring failed: the connection is lost).
template <typename Fill>
bool Client::Impl::putFrameRecord(size_t size, uint32_t type, Fill&& fill) {
  Result<std::span<std::byte>> room = shm->reserveFrameRecord(size, type);
  if (!room) {
    if (room.status().code() != Errc::would_block) lose(room.status());
    return false;
  }
  fill(*room);
  Status st = shm->commitRecord();
  if (st) st = shm->announce();
  if (!st) lose(st);
  return true;
}

// Shared memory: the frames into the ring to the daemon, as far as it has
// room (the rest waits in `out`, like bytes a full socket did not take).
void Client::Impl::writeRing() {
  while (!out.empty() && conn.ok()) {
    // The frames before the next large SEND as a stream of records; that
    // SEND as one frame record.
    const size_t plain = frameRecordsQueued.empty()
                             ? out.size()
                             : static_cast<size_t>(frameRecordsQueued.front().at - outWritten);
    if (plain > 0) {
      Result<size_t> put = shm->write(out.readable().first(plain));
      if (!put) return lose(put.status());
      out.consume(*put);
      outWritten += *put;
      if (*put < plain) return;  // the ring is full
      continue;
    }
    const auto [at, size, type] = frameRecordsQueued.front();
    if (!putFrameRecord(
            size, type,
            [&](std::span<std::byte> room) { std::memcpy(room.data(), out.data(), size); }) ||
        !conn.ok())
      return;
    out.consume(size);
    outWritten += size;
    frameRecordsQueued.pop_front();
  }
}

void Client::Impl::readRing() {
  while (conn.ok()) {
    Result<size_t> got = shm->read(in, kReadChunk);
    if (!got) return lose(got.status());
    if (*got != 0) {
      parseInput(in);
    } else if (!shm->frameWaiting() || !takeDeliveryBlock()) {
      return;
    }
  }
}

bool Client::Impl::takeDeliveryBlock() {
  if (viewReady) return false;  // a view waits to be taken first: this comes after it
  parseInput(in);               // the frames read before it come first
  if (!conn.ok() || viewReady) return false;
  // The daemon places a block only behind whole frames.
  if (!in.readable().empty()) {
    lose(Status(Errc::protocol_error, "from rdmamsgd: a payload record inside a frame"));
    return false;
  }
  Result<std::span<const std::byte>> block = shm->frameRecord();
  if (!block) {
    lose(block.status());
    return false;
  }
  const proto::DecodeResult res = proto::decodeFrame(*block, maxBody);
  if (res.outcome != proto::DecodeOutcome::frame || res.consumed != block->size() ||
      res.frame.kind != FrameKind::deliver) {
    lose(Status(Errc::protocol_error, "from rdmamsgd: a delivery block that is not one DELIVER"));
    return false;
  }
  if (wantView && inbox.empty()) {
    Result<ShmChannel::FrameHold> hold = shm->holdFrame();
    if (!hold) {
      lose(hold.status());
      return false;
    }
    viewBlock = *hold;
    viewBlockFrame = res.frame;
    viewReady = true;
    return false;
  }
  handleFrame(res.frame);  // copied into the inbox
  if (Status st = shm->consumeFrame(); !st) {
    lose(st);
    return false;
  }
  return true;
}

void Client::Impl::parseInput(ByteBuffer& from) {
  while (conn.ok()) {
    const proto::DecodeResult res = proto::decodeFrame(from.readable(), maxBody);
    if (res.outcome == proto::DecodeOutcome::need_more) return;
    if (res.outcome == proto::DecodeOutcome::error && res.version != 0) {
      return lose(Status(Errc::protocol_error,
                         "rdmamsgd speaks local protocol version " + std::to_string(res.version) +
                             ", this client " + std::to_string(proto::kProtocolVersion) +
                             ": use a client library and daemon of the same release"));
    }
    if (res.outcome == proto::DecodeOutcome::error) {
      return lose(Status(Errc::protocol_error, std::string("from rdmamsgd: ") + res.reason));
    }
    // receiveView() reads the next message where it lies.
    if (wantView && res.frame.kind == FrameKind::deliver && &from == &in && inbox.empty()) {
      viewReady = true;
      return;
    }
    handleFrame(res.frame);
    from.consume(res.consumed);
  }
}

void Client::Impl::handleFrame(const proto::Frame& f) {
  switch (f.kind) {
    case FrameKind::welcome:
      nodeName.assign(f.node);
      maxMessage = f.maxMessageSize;
      maxBody = std::max(proto::maxBodyFor(f.maxMessageSize), proto::kDefaultMaxBody);
      welcomed = true;
      return;
    case FrameKind::registered:
      if (!registerReply && f.service == registerService) registerReply = Status();
      return;
    case FrameKind::deliver: {
      Message& m = inbox.pushSlot();  // a reused slot: names of a stream are already there
      assignIfChanged(m.srcNode, f.node);
      assignIfChanged(m.srcService, f.service);
      assignIfChanged(m.service, f.otherService);
      m.payload.assign(f.payload.begin(), f.payload.end());
      return;
    }
    case FrameKind::ack:
      for (size_t i = 0; i < f.ackRangeCount(); ++i) {
        const proto::AckRange a = f.ackRange(i);
        Pending& p = completions.pushSlot();
        p.first = a.first;
        p.count = a.count;
        p.status = Status();
        inFlight -= std::min<size_t>(inFlight, a.count);
      }
      return;
    case FrameKind::error:
      return handleError(f);
    case FrameKind::status_reply:
      statusReply = std::string(f.text);
      return;
    case FrameKind::bye:
      return lose(Status(Errc::not_connected, "rdmamsgd said goodbye"));
    case FrameKind::hold:
      return setHeld(f, true);
    case FrameKind::resume:
      return setHeld(f, false);
    case FrameKind::shm_accept:
      if (!shmOffered || shmDecided)
        return lose(Status(Errc::protocol_error, "rdmamsgd sent SHM_ACCEPT unasked"));
      shmDecided = true;
      return startSharedMemory();
    case FrameKind::shm_offer:
    case FrameKind::hello:
    case FrameKind::consumed:
    case FrameKind::reg:
    case FrameKind::unreg:
    case FrameKind::send:
    case FrameKind::status_request:
    case FrameKind::sub:
    case FrameKind::unsub:
    case FrameKind::pub:
    case FrameKind::respond:
      return lose(Status(Errc::protocol_error, "rdmamsgd sent a client frame"));
    case FrameKind::subscribed:
    case FrameKind::pub_ack:
    case FrameKind::msg:
    case FrameKind::reply:
      return lose(Status(Errc::protocol_error, "rdmamsgd sent a subject frame unasked"));
  }
}

bool Client::Impl::isHeld(std::string_view node, std::string_view service) const {
  for (const auto& [n, s] : held)
    if (n == node && s == service) return true;
  return false;
}

void Client::Impl::setHeld(const proto::Frame& f, bool on) {
  if (on == isHeld(f.node, f.service)) return;
  if (on) {
    held.emplace_back(f.node, f.service);
    return;
  }
  std::erase_if(held, [&f](const auto& d) { return d.first == f.node && d.second == f.service; });
}

// Tells the daemon what the application has taken (cumulative): its
// senders are confirmed only then.
void Client::Impl::reportConsumed() {
  if (takenMark == reported || !conn.ok()) return;
  proto::encodeConsumed(out, takenMark);
  reported = takenMark;
}

void Client::Impl::handleError(const proto::Frame& f) {
  Status st(f.errc, std::string(f.text));
  if (f.msgId != 0) {
    Pending& p = completions.pushSlot();
    p.first = f.msgId;
    p.count = 1;
    p.status = std::move(st);
    if (inFlight > 0) --inFlight;
    return;
  }
  switch (static_cast<FrameKind>(f.inReplyTo)) {
    case FrameKind::shm_offer:  // refused: the socket it is
      shmDecided = true;
      shm.reset();
      return;
    case FrameKind::reg:
      if (!registerReply) registerReply = std::move(st);
      return;
    case FrameKind::status_request:
      statusReply = Result<std::string>(std::move(st));
      return;
    default:
      return lose(std::move(st));  // connection-level: the daemon closes
  }
}

void Client::Impl::takeFront(Completion& c) {
  Pending& p = completions.front();
  c.msgId = p.first;
  if (p.count > 1) {
    c.status = p.status;
    ++p.first;
    --p.count;
    return;
  }
  std::swap(c.status, p.status);
  completions.recycleFront();
}

bool Client::Impl::take(uint64_t msgId, Completion& c) {
  for (size_t i = 0; i < completions.size(); ++i) {
    Pending& p = completions[i];
    if (msgId < p.first || msgId - p.first >= p.count) continue;
    c.msgId = msgId;
    c.status = p.status;
    const uint64_t last = p.first + p.count - 1;
    if (p.count == 1) {
      completions.eraseAt(i);
    } else if (msgId == p.first) {
      ++p.first;
      --p.count;
    } else if (msgId == last) {
      --p.count;
    } else {  // split the range around msgId
      p.count = msgId - p.first;
      Status st = p.status;
      Pending& after = completions.insertAt(i + 1);
      after.first = msgId + 1;
      after.count = last - msgId;
      after.status = std::move(st);
    }
    return true;
  }
  return false;
}

template <typename Done>
Status Client::Impl::waitFor(Done done, std::chrono::milliseconds timeout) {
  // Already there (e.g. a completion from an ACK frame read earlier): no I/O.
  if (done()) return {};
  Status st = waitUntil(done, timeout);
  // It worked the rings: the application may poll fd() next, so the daemon
  // must ring for what comes — when it sleeps; a spinning client asks only
  // before it sleeps (prepareToPoll()).
  if (shmInUse && conn.ok() && !shm->armed()) settleIfSleeping();
  return st;
}

template <typename Done>
Status Client::Impl::waitUntil(Done done, std::chrono::milliseconds timeout) {
  // Already there (e.g. a completion from an ACK frame read earlier): no I/O.
  if (done()) return {};
  parseInput(in);  // frames left behind an in-place view
  if (done()) return {};
  const auto deadline = Clock::now() + timeout;
  reportConsumed();  // before waiting: the daemon may be waiting for it
  for (;;) {
    if (conn.ok()) writeSome();
    if (conn.ok()) readSome();
    if (done()) return {};
    if (!conn.ok()) return conn;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return Status(Errc::timeout, "no answer from rdmamsgd in time");
    const int ms = static_cast<int>(std::min<long long>(left, 1000));
    if (shmInUse) {
      if (idle != IdleStrategy::sleep && spinOnRings(done, deadline)) continue;
      sleepOnRing(ms);
      continue;
    }
    pollfd p{fd.get(), static_cast<short>(POLLIN | (out.empty() ? 0 : POLLOUT)), 0};
    ++io.polls;
    if (::poll(&p, 1, ms) < 0 && errno != EINTR) {
      lose(errnoStatus(Errc::io_error, "poll", errno));
    }
  }
}

template <typename Done>
bool Client::Impl::spinOnRings(Done& done, Clock::time_point deadline) {
  // Spinning, this client does not ask to be rung: a word armed earlier
  // (processIo(), prepareToPoll()) is taken back first.
  if (shm->armed()) {
    if (Result<bool> rung = shm->disarm(); !rung) lose(rung.status());
  }
  const bool busy = idle == IdleStrategy::busy;
  const Clock::time_point until =
      busy ? deadline : std::min<Clock::time_point>(deadline, Clock::now() + kAdaptiveSpin);
  for (;;) {
    const ShmChannelCounters& c = shm->counters();
    const uint64_t moved = c.recordsRead + c.recordsWritten;
    writeRing();
    readRing();
    if (!conn.ok() || done() || c.recordsRead + c.recordsWritten != moved) return true;
    const Clock::time_point now = Clock::now();
    if (now >= until) return busy;  // busy: the caller sees the deadline
    lookAtSocketNowAndThen(now);
    cpuRelax();
  }
}

void Client::Impl::lookAtSocketNowAndThen(Clock::time_point now) {
  if (now < nextSocketLook) return;
  nextSocketLook = now + kSocketLook;
  readSocket(sockIn);
}

// Waits up to `ms` for the daemon's doorbell (records, or room it released)
// or its socket (a closing ERROR, or the end) — after telling the daemon,
// through the rings, that it sleeps.
void Client::Impl::sleepOnRing(int ms) {
  if (!armForSleep()) return;  // something arrived meanwhile
  pollfd p[2] = {{shm->wakeFd(), POLLIN, 0}, {fd.get(), POLLIN, 0}};
  ++io.polls;
  if (::poll(p, 2, ms) < 0 && errno != EINTR)
    return lose(errnoStatus(Errc::io_error, "poll", errno));
  if (Result<bool> rung = shm->disarm(); !rung) return lose(rung.status());
  if (p[1].revents != 0) readSocket(sockIn);
}

// What processIo(), tryReceive() and pollCompletion() do with shared
// memory: after a wake-up, reset the doorbell and look at the socket (a
// closing ERROR, or its end); move the frames; then leave the daemon told
// to ring, so that an application polling fd() is woken by what comes next
// — or, when records keep arriving, leave fd() readable.
void Client::Impl::pumpRings() {
  batchWake = false;
  const bool wasArmed = shm->armed();
  Result<bool> rung = shm->disarm();
  if (!rung) return lose(rung.status());
  reportConsumed();
  writeRing();
  const uint64_t before = shm->counters().recordsRead;
  readRing();
  // Woken, but not by the doorbell and with nothing in the ring: the socket
  // (a closing ERROR, or its end) — or a spurious call, for one recv.
  if (wasArmed && !*rung && shm->counters().recordsRead == before) {
    if (Status st = shm->resetDoorbell(); !st) return lose(st);
    readSocket(sockIn);
  }
  if (idle != IdleStrategy::sleep) lookAtSocketNowAndThen(Clock::now());
  settleIfSleeping();
}

// Before the application polls fd(): what is queued goes out, and the
// daemon is asked to ring — unless records came meanwhile (then the word is
// taken back: nobody sleeps).
bool Client::Impl::prepareToPoll() {
  if (!shmInUse || !conn.ok()) return true;
  if (!inbox.empty() || !completions.empty()) return false;
  if (shm->armed()) {
    if (Result<bool> rung = shm->disarm(); !rung) lose(rung.status());
  }
  const uint64_t before = shm->counters().recordsRead;
  writeRing();
  readRing();
  if (!conn.ok()) return false;
  if (shm->counters().recordsRead == before && armForSleep()) return true;
  if (Result<bool> rung = shm->disarm(); !rung) lose(rung.status());
  return false;
}

// The rings are worked: leave the daemon told to ring when anything comes
// (or room appears), so that an application polling fd() wakes for it — or,
// when records keep arriving, leave fd() readable.
void Client::Impl::settleRings() {
  for (int round = 0; round < 4 && conn.ok(); ++round) {
    if (armForSleep()) return;
    Result<bool> rung = shm->disarm();
    if (!rung) return lose(rung.status());
    writeRing();
    readRing();
  }
  if (!conn.ok()) return;
  if (Status st = shm->wakeSelf(); !st) lose(st);
}

void Client::Impl::offerSharedMemory(const ConnectOptions& opts) {
  Result<ShmChannel> channel = ShmChannel::create(opts.sendRingCapacity, opts.receiveRingCapacity,
                                                  payloadArea ? opts.payloadAreaCapacity : 0,
                                                  deliveryArea ? opts.deliveryAreaCapacity : 0);
  if (!channel) return;  // no shared memory here (e.g. memfd refused): the socket it is
  shm = std::make_unique<ShmChannel>(std::move(channel.value()));
  proto::encodeShmOffer(out, shm_ring::kVersion, shm->toDaemonCapacity(), shm->toClientCapacity());
  const auto fds = shm->fdsToPass();
  Result<size_t> sent = sendFds(fd.get(), fds, out.readable());
  if (!sent) {
    shm.reset();
    return lose(sent.status());
  }
  out.consume(*sent);
  shmOffered = true;
}

// SHM_ACCEPT: every later frame goes through the rings; fd() becomes an
// epoll set of the doorbell and the socket.
void Client::Impl::startSharedMemory() {
  shmInUse = true;
  epfd.reset(::epoll_create1(EPOLL_CLOEXEC));
  if (!epfd) return lose(errnoStatus(Errc::io_error, "epoll_create1", errno));
  for (int watched : {shm->wakeFd(), fd.get()}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = watched;
    if (::epoll_ctl(epfd.get(), EPOLL_CTL_ADD, watched, &ev) != 0)
      return lose(errnoStatus(Errc::io_error, "epoll_ctl", errno));
  }
}

// --- Client ---------------------------------------------------------------------------

std::string Client::defaultSocketPath() {
  const char* env = std::getenv("RDMAMSG_SOCKET");
  return (env != nullptr && *env != '\0') ? std::string(env) : std::string(kDefaultSocket);
}

Result<Client> Client::connect(std::string_view socketPath, const ConnectOptions& opts) {
  auto impl = std::make_unique<Impl>();
  impl->socketPath = socketPath.empty() ? defaultSocketPath() : std::string(socketPath);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (impl->socketPath.size() >= sizeof(addr.sun_path)) {
    return Status(Errc::bad_request, "socket path too long: " + impl->socketPath);
  }
  std::memcpy(addr.sun_path, impl->socketPath.c_str(), impl->socketPath.size() + 1);
  impl->fd.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!impl->fd) return errnoStatus(Errc::io_error, "socket", errno);
  // A daemon that does not accept (its backlog full) would hold connect()
  // for ever; the send timeout bounds it (unix(7)), then is cleared.
  const auto ms = opts.timeout.count() > 0 ? opts.timeout.count() : 1;
  timeval tv{static_cast<time_t>(ms / 1000), static_cast<suseconds_t>(ms % 1000 * 1000)};
  ::setsockopt(impl->fd.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (::connect(impl->fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (errno == EAGAIN)
      return Status(Errc::timeout, "rdmamsgd at " + impl->socketPath +
                                       " is not accepting connections (its backlog is full)");
    return errnoStatus(Errc::io_error, "cannot connect to rdmamsgd at " + impl->socketPath, errno);
  }
  tv = {};
  ::setsockopt(impl->fd.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  Result<IdleStrategy> idle = idleStrategyFor(opts);
  if (!idle) return idle.status();
  impl->idle = *idle;
  proto::encodeHello(impl->out, opts.clientName);
  Impl& im = *impl;
  if (sharedMemoryWanted(opts)) im.offerSharedMemory(opts);
  Status st =
      im.waitFor([&im] { return im.welcomed && im.shmOffered == im.shmDecided; }, opts.timeout);
  if (!st.ok()) return st;
  return Client(std::move(impl));
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::Client(Client&&) noexcept = default;
Client& Client::operator=(Client&&) noexcept = default;
Client::~Client() {
  close();
}

const std::string& Client::nodeName() const {
  return impl_->nodeName;
}
uint32_t Client::maxMessageSize() const {
  return impl_->maxMessage;
}
int Client::fd() const {
  if (!impl_) return -1;
  return impl_->shmInUse ? impl_->epfd.get() : impl_->fd.get();
}
bool Client::wantsWrite() const {
  return !impl_->shmInUse && !impl_->out.empty();  // room in a ring rings the doorbell
}
IdleStrategy Client::idleStrategy() const {
  return impl_->idle;
}
void Client::setIdleStrategy(IdleStrategy s) {
  impl_->idle = s;
}
bool Client::prepareToPoll() {
  return impl_->prepareToPoll();
}
bool Client::usesSharedMemory() const {
  return impl_ && impl_->shmInUse;
}
ClientCounters Client::counters() const {
  ClientCounters c = impl_->io;
  if (impl_->shm) {
    c.doorbellRings = impl_->shm->counters().wakesSent;
    c.doorbellReads = impl_->shm->counters().doorbellReads;
  }
  return c;
}
size_t Client::inFlight() const {
  return impl_->inFlight;
}
const Status& Client::connectionStatus() const {
  return impl_->conn;
}

void Client::close() {
  if (!impl_ || !impl_->fd) return;
  if (impl_->conn.ok()) {
    // What the application took counts, even if it took only part of what
    // the library had read: those messages are confirmed, the rest fail back.
    impl_->reportConsumed();
    proto::encodeBye(impl_->out);
    impl_->writeSome();  // best effort, never waits
  }
  impl_->lose(Status(Errc::not_connected, "connection closed by the client"));
}

Status Client::registerService(std::string_view service, std::chrono::milliseconds timeout) {
  if (Status st = checkName("service", service); !st.ok()) return st;
  if (!impl_->conn.ok()) return impl_->conn;
  Impl& im = *impl_;
  im.registerReply.reset();
  im.registerService.assign(service);
  proto::encodeRegister(im.out, service);
  Status st = im.waitFor([&im] { return im.registerReply.has_value(); }, timeout);
  return st.ok() ? *im.registerReply : st;
}

Status Client::unregisterService(std::string_view service) {
  if (Status st = checkName("service", service); !st.ok()) return st;
  if (!impl_->conn.ok()) return impl_->conn;
  proto::encodeUnregister(impl_->out, service);
  impl_->writeSome();
  return impl_->conn;
}

Result<uint64_t> Client::trySend(std::string_view node, std::string_view service,
                                 std::span<const std::byte> payload, std::string_view fromService) {
  return impl_->queueSend(node, service, payload, fromService, false);
}

Result<uint64_t> Client::send(std::string_view node, std::string_view service,
                              std::span<const std::byte> payload, std::string_view fromService) {
  return impl_->queueSend(node, service, payload, fromService, true);
}

Status Client::Impl::checkSend(std::string_view node, std::string_view service,
                               std::string_view fromService, size_t size) {
  // A stream names the same destination every time: check it once. (The
  // names remembered start empty, which is not a valid name: check that too.)
  if (node != checkedNode || node.empty()) {
    if (Status st = checkName("node", node); !st.ok()) return st;
    checkedNode.assign(node);
  }
  if (service != checkedService || service.empty()) {
    if (Status st = checkName("service", service); !st.ok()) return st;
    checkedService.assign(service);
  }
  if (!fromService.empty()) {
    if (Status st = checkName("service", fromService); !st.ok()) return st;
  }
  if (size > maxMessage) {
    return Status(Errc::too_large, "message of " + std::to_string(size) +
                                       " bytes exceeds the maximum of " +
                                       std::to_string(maxMessage));
  }
  return Status();
}

Result<uint64_t> Client::Impl::queueSend(std::string_view node, std::string_view service,
                                         std::span<const std::byte> payload,
                                         std::string_view fromService, bool mayWait,
                                         const Block* claimed) {
  if (!conn.ok()) return conn;
  if (Status st = checkSend(node, service, fromService, payload.size()); !st.ok()) return st;
  // Blocked by a full buffer: would_block until it drained below the write
  // threshold (by then any HOLD the daemon sent meanwhile has been read),
  // so that trySend does not flap between accepted and would_block.
  if (!mayWait && (outBlocked || out.size() >= kWriteBlockLimit)) {
    writeSome();
    readSome();
    if (!conn.ok()) return conn;
    outBlocked = out.size() >= kWriteThreshold;
    if (outBlocked && shmInUse) settleIfSleeping();  // fd() wakes when room appears
    if (outBlocked)
      return Status(Errc::would_block,
                    std::to_string(out.size()) + " bytes are waiting for rdmamsgd to read them");
  }
  if (isHeld(node, service)) {
    if (!mayWait && shmInUse) settleIfSleeping();  // fd() wakes for the RESUME
    if (!mayWait)
      return Status(Errc::would_block, "rdmamsgd holds " + std::string(node) + "/" +
                                           std::string(service) +
                                           ": its queue is full (the listener does not keep up)");
    const std::string n(node), sv(service);
    Status st = waitFor([&] { return !isHeld(n, sv); }, std::chrono::hours(24));
    if (!st.ok()) return st;
  }
  const uint64_t id = nextId++;
  const LargeSend large = sendInFrameRecord(id, node, service, fromService, payload, claimed);
  if (large == LargeSend::written) {
    ++inFlight;
    readSome();  // a HOLD is seen soon, as when the frames go through `out`
    if (!conn.ok()) return conn;
    return id;
  }
  if (large == LargeSend::inStream) proto::encodeSend(out, id, node, service, fromService, payload);
  ++inFlight;
  if (shmInUse && !mayWait && out.size() < kWriteThreshold) {
    // Batched as over the socket (a daemon that finds more in one turn
    // sends more per RDMA post), but trySend's caller polls fd() next and
    // calls back: fd() is made readable once per batch, and the next
    // processIo()/tryReceive()/pollCompletion() writes the batch.
    if (!batchWake && idle == IdleStrategy::sleep) {
      batchWake = true;
      if (Status st = shm->wakeSelf(); !st) lose(st);
    }
  } else if (out.size() >= kWriteThreshold) {
    writeSome();
    readSome();  // a HOLD is seen within 64 KiB, not once the socket is full
    if (shmInUse && !mayWait) settleIfSleeping();
  }
  if (mayWait && out.size() >= kWriteBlockLimit) {
    Status st = waitFor([this] { return out.size() < kWriteThreshold; }, std::chrono::hours(24));
    if (!st.ok()) return st;
  }
  return id;
}

// A large SEND over shared memory goes without a copy in the daemon, which
// posts its payload from where it lies: written into a block of the payload
// area, named by a payload record; or, when the area has no room now, as
// one frame record in the ring. A record goes straight into the ring when
// nothing is queued before it and the ring has room now; else it is queued
// in `out` like any frame, marked, and writeRing() writes it in its turn
// (the blocking and HOLD rules are every frame's).
Client::Impl::LargeSend Client::Impl::sendInFrameRecord(uint64_t id, std::string_view node,
                                                        std::string_view service,
                                                        std::string_view fromService,
                                                        std::span<const std::byte> payload,
                                                        const Block* claimed) {
  if (claimed) claimTaken = true;
  if (!claimed && (!shmInUse || !frameRecords || !shm->frameRecords() ||
                   payload.size() < shm_channel::kMinFrameRecordPayload))
    return LargeSend::inStream;
  const size_t size = proto::sendFrameSize(node, service, fromService, payload.size());
  writeRing();
  if (!conn.ok()) {
    if (claimed) shm->freeBlock(*claimed);
    return LargeSend::written;  // the connection's error answers
  }
  std::optional<Block> block;
  if (claimed) {
    block = *claimed;
    proto::encodeSendHeadAt(block->bytes, id, node, service, fromService);
  } else if ((block = shm->allocateBlock(size))) {
    proto::encodeSendAt(block->bytes, id, node, service, fromService, payload);
  }
  if (block) {
    shm->publishBlock(*block);  // its record is written now or queued in `out`
    const shm_payload::Descriptor d = ShmChannel::describe(*block);
    const auto body = std::as_bytes(std::span(&d, 1));
    if (out.empty() &&
        putFrameRecord(body.size(), shm_ring::kPayloadRecord, [&](std::span<std::byte> room) {
          std::memcpy(room.data(), body.data(), body.size());
        }))
      return LargeSend::written;
    if (!conn.ok()) {
      shm->freeBlock(*block);
      return LargeSend::written;
    }
    frameRecordsQueued.push_back({outWritten + out.size(), body.size(), shm_ring::kPayloadRecord});
    out.append(body);
    return LargeSend::queued;
  }
  if (size > shm->maxRecord()) return LargeSend::inStream;
  if (out.empty()) {
    if (putFrameRecord(size, shm_ring::kFrameRecord, [&](std::span<std::byte> room) {
          proto::encodeSendAt(room, id, node, service, fromService, payload);
        }))
      return LargeSend::written;
    if (!conn.ok()) return LargeSend::written;
  }
  frameRecordsQueued.push_back({outWritten + out.size(), size, shm_ring::kFrameRecord});
  return LargeSend::inStream;
}

Result<uint64_t> Client::send(std::string_view node, std::string_view service,
                              std::string_view text, std::string_view fromService) {
  return send(node, service, std::as_bytes(std::span(text.data(), text.size())), fromService);
}

Status Client::sendAndWait(std::string_view node, std::string_view service,
                           std::span<const std::byte> payload, std::chrono::milliseconds timeout) {
  Result<uint64_t> id = send(node, service, payload);
  if (!id.ok()) return id.status();
  Impl& im = *impl_;
  Completion c;
  const uint64_t want = *id;
  Status st = im.waitFor([&] { return im.take(want, c); }, timeout);
  return st.ok() ? c.status : st;
}

Status Client::flush(std::chrono::milliseconds timeout) {
  Impl& im = *impl_;
  if (!im.conn.ok()) return im.conn;
  return im.waitFor([&im] { return im.allWritten(); }, timeout);
}

// Hands the first inbox message to `out`: the payload buffers are swapped
// (out's old one is recycled by the slot), names copied only when they differ.
void Client::Impl::takeMessage(Message& m) {
  Message& first = inbox.front();
  assignIfChanged(m.srcNode, first.srcNode);
  assignIfChanged(m.srcService, first.srcService);
  assignIfChanged(m.service, first.service);
  m.payload.swap(first.payload);
  inbox.recycleFront();
  noteTaken();
}

void Client::Impl::noteTaken() {
  ++taken;
  if (confirmOnReceive) takenMark = taken;
  // Everything read is taken: say so now, so the last message of a burst is
  // confirmed at once (one CONSUMED per read at full speed) even if the
  // application does not call the library again for a while.
  if (confirmOnReceive && allReadTaken()) {
    reportConsumed();
    writeSome();
  }
}

bool Client::Impl::allReadTaken() const {
  return inbox.empty() &&
         proto::decodeFrame(in.readable(), maxBody).outcome == proto::DecodeOutcome::need_more;
}

bool Client::tryReceive(Message& out) {
  Impl& im = *impl_;
  if (im.viewHandle != 0) return false;  // a view is held: release it first
  if (im.inbox.empty() && im.conn.ok()) im.pump();
  if (im.inbox.empty()) return false;
  im.takeMessage(out);
  return true;
}

Status Client::receive(Message& out, std::chrono::milliseconds timeout) {
  Impl& im = *impl_;
  if (im.viewHandle != 0) return detail::viewHeldError();
  Status st = im.waitFor([&im] { return !im.inbox.empty(); }, timeout);
  if (!st.ok() && im.inbox.empty()) return st;
  im.takeMessage(out);
  return {};
}

Status Client::Impl::waitForView(std::chrono::milliseconds timeout) {
  return waitFor([this] { return viewAvailable(); }, timeout);
}

bool Client::pollCompletion(Completion& out) {
  Impl& im = *impl_;
  if (im.completions.empty() && im.conn.ok()) im.pump();
  if (im.completions.empty()) return false;
  im.takeFront(out);
  return true;
}

Status Client::waitCompletion(Completion& out, std::chrono::milliseconds timeout) {
  Impl& im = *impl_;
  Status st = im.waitFor([&im] { return !im.completions.empty(); }, timeout);
  if (!st.ok() && im.completions.empty()) return st;
  im.takeFront(out);
  return {};
}

Result<std::string> Client::status(std::chrono::milliseconds timeout) {
  Impl& im = *impl_;
  if (!im.conn.ok()) return im.conn;
  im.statusReply.reset();
  proto::encodeStatusRequest(im.out);
  Status st = im.waitFor([&im] { return im.statusReply.has_value(); }, timeout);
  if (!st.ok()) return st;
  return std::move(*im.statusReply);
}

void Client::setConfirmOnReceive(bool on) {
  impl_->confirmOnReceive = on;
  if (on) impl_->takenMark = impl_->taken;
}

Status Client::confirmReceived() {
  Impl& im = *impl_;
  im.takenMark = im.taken;
  im.reportConsumed();
  im.writeSome();
  return im.conn;
}

Status Client::processIo() {
  Impl& im = *impl_;
  if (im.conn.ok()) im.pump();
  return im.conn;
}

}  // namespace rdmamsg
