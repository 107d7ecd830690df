// Session I/O: edge-triggered reads until EAGAIN, frame parsing, batched
// output (see session.h).
#include "daemon/local/session.h"

#include "daemon/loop/counters.h"

#include <event2/event.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "common/local_protocol.h"
#include "daemon/local/log.h"

namespace rdmamsg::local {
namespace {

constexpr size_t kReadChunk = 64 * 1024;
// Bytes read per wakeup before yielding to other clients; the rest is picked
// up by re-activating the read event (no new edge needed).
constexpr size_t kReadBudget = 1024 * 1024;

std::string_view toString(Session::State s) {
  switch (s) {
    case Session::State::awaiting_hello:
      return "awaiting_hello";
    case Session::State::ready:
      return "ready";
    case Session::State::closing:
      return "closing";
  }
  return "?";
}

}  // namespace

Session::Session(loop::EventLoop& loop, SessionId id, UniqueFd fd, PeerCred cred, uint32_t maxBody,
                 size_t maxAcksPerFrame, std::chrono::milliseconds helloTimeout,
                 std::function<void()> wake)
    : id_(id),
      wake_(std::move(wake)),
      fd_(std::move(fd)),
      cred_(cred),
      maxBody_(maxBody),
      maxAcksPerFrame_(std::max<size_t>(1, maxAcksPerFrame)),
      name_("client#" + std::to_string(id) + " (pid " + std::to_string(cred.pid) + ", uid " +
            std::to_string(cred.uid) + ")"),
      in_(kReadChunk),
      out_(kReadChunk),
      readEvent_(loop, fd_.get(), EV_READ | EV_PERSIST | EV_ET, [this](short) { onReadable(); }),
      writeEvent_(
          loop, fd_.get(), EV_WRITE | EV_PERSIST | EV_ET,
          [this](short) {
            writable_ = true;
            wake_();
          },
          false),
      helloTimer_(loop, [this] {
        if (state_ != State::awaiting_hello) return;
        helloExpired_ = true;
        wake_();
      }) {
  pendingAcks_.reserve(256);
  helloTimer_.arm(helloTimeout);
}

namespace {
bool edgeAllowed(Session::State from, Session::State to) {
  using S = Session::State;
  return (from == S::awaiting_hello && (to == S::ready || to == S::closing)) ||
         (from == S::ready && to == S::closing);
}
}  // namespace

void Session::setState(State next) {
  if (next == state_) return;
  if (!edgeAllowed(state_, next)) {
    // A bug: said where it cannot be lost (the logger may be asynchronous), then stop.
    const std::string line = name_ + ": invalid session state change " +
                             std::string(toString(state_)) + " -> " + std::string(toString(next));
    localLog().critical("{}", line);
    std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
    std::abort();
  }
  localLog().debug("{}: {} -> {}", name_, toString(state_), toString(next));
  state_ = next;
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
  if (wasPaused && pauseMask_ == 0 && state_ != State::closing) readEvent_.activate(EV_READ);
}

void Session::kickRead() {
  readEvent_.activate(EV_READ);
}

// Reads until EAGAIN (edge-triggered) or the budget, then marks the
// session: its owner parses what came in its service phase. Nothing is read
// while the session is paused, so a paused client's writes block.
void Session::onReadable() {
  if (state_ == State::closing || pauseMask_ != 0 || endReason_ != nullptr) return;
  size_t budget = kReadBudget;
  for (;;) {
    if (budget == 0) {
      readEvent_.activate(EV_READ);  // the rest on the next iteration
      break;
    }
    auto room = in_.prepare(kReadChunk);
    const ssize_t n = ::read(fd_.get(), room.data(), room.size());
    loop::syscalls().socketReads++;
    if (n > 0) {
      in_.commit(static_cast<size_t>(n));
      budget -= std::min(budget, static_cast<size_t>(n));
    } else if (n == 0) {
      endInput("client closed the connection", 0);
      break;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      break;
    } else if (errno != EINTR) {
      endInput("read failed", errno);
      break;
    }
  }
  wake_();
}

void Session::endInput(const char* why, int err) {
  endReason_ = why;
  lastErrno_ = err;
}

void Session::queueAcks(uint64_t msgId, uint64_t count) {
  while (count > 0) {
    if (pendingAcks_.empty() || pendingAcks_.back().first + pendingAcks_.back().count != msgId ||
        pendingAcks_.back().count == UINT32_MAX)
      pendingAcks_.push_back({msgId, 0});
    proto::AckRange& last = pendingAcks_.back();
    const uint64_t n = std::min<uint64_t>(count, UINT32_MAX - last.count);
    last.count += static_cast<uint32_t>(n);
    msgId += n;
    count -= n;
  }
}

void Session::encodePendingAcks() {
  std::span<const proto::AckRange> runs(pendingAcks_);
  while (!runs.empty()) {
    const size_t n = std::min(runs.size(), maxAcksPerFrame_);
    proto::encodeAck(out_, runs.first(n));
    runs = runs.subspan(n);
  }
  pendingAcks_.clear();
}

void Session::track(const Receipt& r, size_t frameBytes) {
  const uint64_t end = ++delivered_;
  unconsumedBytes_ += frameBytes;
  if (!tracked_.empty()) {
    Tracked& last = tracked_.back();
    if (last.receipt.continuedBy(r) && last.bytes < kReceiptSpan) {
      last.end = end;
      last.receipt.count += r.count;
      last.bytes += frameBytes;
      return;
    }
  }
  tracked_.push_back({end, r, frameBytes});
}

bool Session::consume(uint64_t taken) {
  if (taken < taken_ || taken > delivered_) return false;
  taken_ = taken;
  return true;
}

Session::FlushResult Session::flush() {
  encodePendingAcks();
  while (!out_.empty()) {
    iovec iov{const_cast<std::byte*>(out_.data()), out_.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    const ssize_t n = ::sendmsg(fd_.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    loop::syscalls().socketWrites++;
    if (n >= 0) {
      out_.consume(static_cast<size_t>(n));
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (state_ != State::closing) writeEvent_.enable();
      return FlushResult::blocked;
    } else if (errno != EINTR) {
      lastErrno_ = errno;
      return FlushResult::failed;
    }
  }
  writeEvent_.disable();
  return FlushResult::drained;
}

void Session::stopEvents() {
  readEvent_.disable();
  writeEvent_.disable();
}

}  // namespace rdmamsg::local
