// Session I/O: edge-triggered reads until EAGAIN, the offer window, batched
// output, and the shared-memory link once the client has one (see
// session.h).
#include "daemon/local/session.h"

#include <event2/event.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "common/fd_passing.h"
#include "common/local_protocol.h"
#include "daemon/local/log.h"
#include "daemon/loop/counters.h"

namespace rdmamsg::local {
namespace {

constexpr size_t kReadChunk = 64 * 1024;

std::string nameOf(SessionId id, const PeerCred& cred) {
  return "client#" + std::to_string(id) + " (pid " + std::to_string(cred.pid) + ", uid " +
         std::to_string(cred.uid) + ")";
}

// A read from the client's socket failed: the session ends without an
// error frame for the client (it cannot be told), the log says why.
Status readFailed(int err) {
  return Status(Errc::ok, std::string("read failed: ") + std::strerror(err));
}

// The doorbell could not be read: the shared-memory link is broken (its
// channel keeps why), and the session ends as after a failed read.
Status doorbellFailed() {
  return Status(Errc::ok, "reading the doorbell failed");
}

}  // namespace

std::string_view toString(Session::State s) {
  switch (s) {
    case Session::State::awaiting_hello:
      return "awaiting_hello";
    case Session::State::offering:
      return "offering";
    case Session::State::socket:
      return "socket";
    case Session::State::shared_memory:
      return "shared_memory";
    case Session::State::closing:
      return "closing";
  }
  return "?";
}

bool allowedEdge(Session::State from, Session::State to) {
  using S = Session::State;
  switch (from) {
    case S::awaiting_hello:
      return to == S::offering || to == S::closing;
    case S::offering:
      return to == S::socket || to == S::shared_memory || to == S::closing;
    case S::socket:
    case S::shared_memory:
      return to == S::closing;
    case S::closing:
      return false;
  }
  return false;
}

Session::Session(loop::EventLoop& loop, SessionId id, UniqueFd fd, PeerCred cred, uint32_t maxBody,
                 size_t maxAcksPerFrame, std::chrono::milliseconds helloTimeout,
                 std::function<void()> wake)
    : loop_(loop),
      id_(id),
      wake_(std::move(wake)),
      fd_(std::move(fd)),
      cred_(cred),
      maxBody_(maxBody),
      name_(nameOf(id, cred)),
      in_(kReadChunk),
      out_(kReadChunk),
      acks_(maxAcksPerFrame),
      readEvent_(loop, fd_.get(), EV_READ | EV_PERSIST | EV_ET, [this](short) { onReadable(); }),
      writeEvent_(
          loop, fd_.get(), EV_WRITE | EV_PERSIST | EV_ET,
          [this](short) {
            writable_ = true;
            wake_();
          },
          false),
      helloTimer_(loop, [this] {
        if (!state_.is(State::awaiting_hello)) return;
        helloExpired_ = true;
        wake_();
      }) {
  helloTimer_.arm(helloTimeout);
}

void Session::setState(State next) {
  state_.set(next, name_);
}

bool Session::ownsService(std::string_view service) const {
  return std::find(services_.begin(), services_.end(), service) != services_.end();
}

bool Session::removeService(std::string_view service) {
  auto it = std::find(services_.begin(), services_.end(), service);
  if (it == services_.end()) return false;
  services_.erase(it);
  return true;
}

std::string_view Session::defaultService() const {
  return services_.empty() ? std::string_view() : std::string_view(services_.front());
}

void Session::resume(uint8_t reason) {
  const bool wasPaused = pauseMask_ != 0;
  pauseMask_ &= static_cast<uint8_t>(~reason);
  // Continue with the frames already buffered and read on: no edge will come
  // for bytes that arrived while paused.
  if (wasPaused && pauseMask_ == 0 && !closing()) kickRead();
}

void Session::kickRead() {
  if (link_) return link_->kick();
  readEvent_.activate(EV_READ);
}

// --- transports ---------------------------------------------------------------

void Session::stayOnSocket() {
  if (!state_.is(State::offering)) return;
  passedFds_.clear();
  setState(State::socket);
}

void Session::useSharedMemory(std::unique_ptr<ShmChannel> channel) {
  passedFds_.clear();
  link_ = std::make_unique<ShmLink>(loop_, std::move(channel), name_, [this] { onDoorbell(); });
  setState(State::shared_memory);
  link_->kick();  // records may be there already
}

// Reads until EAGAIN (edge-triggered) or the budget, then marks the
// session: its owner parses what came in its service phase. Nothing is read
// while the session is paused, so a paused client's writes block. With
// shared memory the socket carries no frames: only its end is read.
void Session::onReadable() {
  if (closing() || inputEnded()) return;
  if (link_) {
    std::byte probe[64];
    const ssize_t n = ::read(fd_.get(), probe, sizeof probe);
    loop::syscalls().socketReads++;
    if (n == 0) {
      // What the client wrote before it closed (its last CONSUMED, its BYE)
      // is in the ring: all of it is read before the end.
      link_->drain(in_);
      endInput(Status(Errc::ok, "client closed the connection"));
    }
    if (n > 0)
      endInput(Status(Errc::protocol_error, "bytes on the control socket after SHM_ACCEPT"));
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      endInput(readFailed(errno));
    if (inputEnded()) wake_();
    return;
  }
  if (pauseMask_ != 0) return;
  readSocket(kReadBudget);
  wake_();
}

void Session::readSocket(size_t budget) {
  for (;;) {
    if (budget == 0) {
      readEvent_.activate(EV_READ);  // the rest on the next iteration
      return;
    }
    auto room = in_.prepare(kReadChunk);
    ssize_t n;
    if (state_.is(State::awaiting_hello) || state_.is(State::offering)) {
      // The offer window: a SHM_OFFER's descriptors may come with these bytes.
      Result<ReceivedFds> got = receiveFds(fd_.get(), room, kMaxPassedFds);
      loop::syscalls().socketReads++;
      if (!got) {
        if (got.status().code() == Errc::would_block) return;
        return endInput(
            Status(got.status().code(), "receiving descriptors failed: " + got.status().message()));
      }
      n = static_cast<ssize_t>(got->bytes);
      for (UniqueFd& fd : got->fds)
        passedFds_.push_back(std::move(fd));
      if (passedFds_.size() > shm_channel::kFdCount)
        return endInput(Status(Errc::protocol_error, "too many descriptors passed"));
    } else {
      n = ::read(fd_.get(), room.data(), room.size());
      loop::syscalls().socketReads++;
    }
    if (n > 0) {
      in_.commit(static_cast<size_t>(n));
      loop::copies().clientIn += static_cast<size_t>(n);
      budget -= std::min(budget, static_cast<size_t>(n));
    } else if (n == 0) {
      return endInput(Status(Errc::ok, "client closed the connection"));
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return;
    } else if (errno != EINTR) {
      return endInput(readFailed(errno));
    }
  }
}

// The client rang: records arrived, or it released room this side waits for.
void Session::onDoorbell() {
  if (closing() || inputEnded()) return;
  if (!link_->disarm()) {
    endInput(doorbellFailed());
    return wake_();
  }
  if (!out_.empty()) writable_ = true;
  if (pauseMask_ == 0 && !link_->read(in_, kReadBudget))
    endInput(Status(Errc::protocol_error, "the client's shared-memory ring is corrupt"));
  wake_();
}

// The records after a frame record are read on the loop's next turn, as
// those past a read budget are: the turn's other phases (the flush that
// carries a HOLD, other clients) go first. When the input has ended they
// are read now: the session closes after this service phase.
void Session::readAfterFrameRecord() {
  if (!link_ || closing()) return;
  if (inputEnded()) return link_->drain(in_);
  if (pauseMask_ == 0) kickRead();
}

bool Session::pollRing() {
  if (!link_ || closing() || inputEnded()) return false;
  if (!link_->news(pauseMask_ == 0)) return false;
  onDoorbell();
  return true;
}

bool Session::armForSleep() {
  if (!link_ || closing() || inputEnded()) return true;
  return link_->armForSleep(pauseMask_ == 0);
}

void Session::disarmAfterSleep() {
  if (!link_ || closing()) return;
  if (!link_->disarm()) {
    endInput(doorbellFailed());
    wake_();
  }
}

void Session::endInput(Status why) {
  end_ = std::move(why);
}

Status Session::endStatus() const {
  if (!end_ || end_->ok()) return {};
  return *end_;
}

// --- output -----------------------------------------------------------------------

std::unique_ptr<DeliveryBlock> Session::reserveBlock(size_t size, size_t payload) {
  return link_ ? link_->reserveBlock(id_, size, payload) : nullptr;
}

bool Session::publishBlock(DeliveryBlock& block) {
  return link_ && out_.empty() && link_->publishBlock(block);
}

FlushResult Session::flush() {
  acks_.encode(out_);
  if (link_) return link_->flush(out_);
  return flushToSocket();
}

FlushResult Session::flushToSocket() {
  while (!out_.empty()) {
    iovec iov{const_cast<std::byte*>(out_.data()), out_.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    const ssize_t n = ::sendmsg(fd_.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    loop::syscalls().socketWrites++;
    if (n >= 0) {
      out_.consume(static_cast<size_t>(n));
      loop::copies().clientOut += static_cast<size_t>(n);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!closing()) writeEvent_.enable();
      return FlushResult::blocked;
    } else if (errno != EINTR) {
      writeError_ = Status(Errc::io_error, std::string("sendmsg: ") + std::strerror(errno));
      return FlushResult::failed;
    }
  }
  writeEvent_.disable();
  return FlushResult::drained;
}

// Best effort, never waiting: the acks already earned and what is queued
// (into the ring, unless the client broke it), then why — on the socket,
// the control channel, when the frames go through shared memory.
void Session::close(const Status& why) {
  acks_.encode(out_);
  setState(State::closing);
  readEvent_.disable();
  writeEvent_.disable();
  if (!link_) {
    if (!why.ok()) proto::encodeError(out_, 0, why.code(), 0, why.message());
    static_cast<void>(flushToSocket());
    return;
  }
  if (!link_->intact()) out_.clear();
  static_cast<void>(link_->flush(out_));
  out_.clear();
  link_->close();
  if (why.ok()) return;
  ByteBuffer frame;
  proto::encodeError(frame, 0, why.code(), 0, why.message());
  const ssize_t n = ::send(fd_.get(), frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  loop::syscalls().socketWrites++;
  if (n < 0) writeError_ = Status(Errc::io_error, std::string("send: ") + std::strerror(errno));
}

}  // namespace rdmamsg::local
