// The Fabric: softrdma's "NIC". One progress thread per process polls every
// TCP endpoint (listeners and connections) with epoll and runs timers, the
// way a NIC makes progress independently of the program's threads.
//
// Endpoints are registered with a raw pointer in epoll_event.data; removing
// one moves its shared_ptr to a graveyard that the progress thread empties
// only after it has handled the events of the current epoll_wait batch, so a
// pointer returned by epoll_wait is always alive while it is used.
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <unordered_set>

#include "base.h"
#include "cq.h"
#include "fabric.h"
#include "fork_hooks.h"

namespace softrdma {

int setErr(int err) {
  errno = err;
  return -1;
}

static bool debugEnabled() {
  static const bool on = [] {
    const char* v = getenv("SOFTRDMA_DEBUG");
    return v != nullptr && *v != '\0' && *v != '0';
  }();
  return on;
}

namespace {
// The format is checked where debugLog / warnLog are called (base.h).
__attribute__((format(printf, 1, 0))) void logLine(const char* fmt, va_list ap) {
  char buf[512];
  vsnprintf(buf, sizeof buf, fmt, ap);
  fprintf(stderr, "softrdma[%d]: %s\n", getpid(), buf);
}
}  // namespace

void debugLog(const char* fmt, ...) {
  if (!debugEnabled()) return;
  va_list ap;
  va_start(ap, fmt);
  logLine(fmt, ap);
  va_end(ap);
}

void warnLog(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  logLine(fmt, ap);
  va_end(ap);
}

static int envInt(const char* name, int def) {
  const char* v = getenv(name);
  if (v == nullptr || *v == '\0') return def;
  return atoi(v);
}

void signalToken(int fd) {
  uint64_t one = 1;
  ssize_t n = write(fd, &one, sizeof one);
  (void)n;
}

bool takeToken(int fd) {
  uint64_t v;
  for (;;) {
    ssize_t n = read(fd, &v, sizeof v);
    if (n == static_cast<ssize_t>(sizeof v)) return true;
    if (n < 0 && errno == EINTR) continue;
    return false;
  }
}

namespace {
// Every endpoint of the process, whichever Fabric polls it (or none yet).
std::mutex g_endpoints_mu;
std::unordered_set<Endpoint*>& endpointList() {
  static auto* l = new std::unordered_set<Endpoint*>();
  return *l;
}
}  // namespace

Endpoint::Endpoint() {
  std::lock_guard lk(g_endpoints_mu);
  endpointList().insert(this);
}

Endpoint::~Endpoint() {
  {
    std::lock_guard lk(g_endpoints_mu);
    endpointList().erase(this);
  }
  if (fd >= 0) close(fd);
}

void forkEndpoints(ForkStep s) {
  switch (s) {
    case ForkStep::Prepare:
      g_endpoints_mu.lock();
      break;
    case ForkStep::Parent:
      g_endpoints_mu.unlock();
      break;
    case ForkStep::Child:
      // The sockets are the parent's: the child drops its references (so that
      // a connection or listener the parent closes is really closed) and never
      // writes to them, shuts them down or changes their epoll registration.
      for (Endpoint* ep : endpointList()) {
        if (ep->fd >= 0) close(ep->fd);
        ep->fd = -1;
        ep->dead = true;
      }
      g_endpoints_mu.unlock();
      break;
  }
}

std::atomic<Fabric*> Fabric::instance_{nullptr};
std::mutex Fabric::instance_mu_;

Fabric& Fabric::get() {
  // Never destroyed: the progress thread runs until the process exits, and
  // objects may be used from atexit handlers and other threads' destructors.
  // A forked child abandons its parent's (Fabric::forkChild) and builds its
  // own here.
  Fabric* f = instance_.load(std::memory_order_acquire);
  if (f != nullptr) return *f;
  std::lock_guard lk(instance_mu_);
  f = instance_.load(std::memory_order_relaxed);
  if (f == nullptr) {
    f = new Fabric();
    instance_.store(f, std::memory_order_release);
  }
  return *f;
}

int maxCqe() {
  static const int value = std::clamp(envInt("SOFTRDMA_MAX_CQE", kMaxCqe), 1, kMaxCqe);
  return value;
}

Fabric::Fabric() {
  timewait_ms = envInt("SOFTRDMA_TIMEWAIT_MS", 100);
  cm_timeout_ms = envInt("SOFTRDMA_CM_TIMEOUT_MS", 3000);
  epfd_ = epoll_create1(EPOLL_CLOEXEC);
  wakefd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  timerfd_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (epfd_ < 0 || wakefd_ < 0 || timerfd_ < 0) {
    perror("softrdma: cannot create the progress thread's epoll");
    abort();
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;  // the wake eventfd and the timerfd: nothing to do but wake
  epoll_ctl(epfd_, EPOLL_CTL_ADD, wakefd_, &ev);
  epoll_ctl(epfd_, EPOLL_CTL_ADD, timerfd_, &ev);
  thread_ = std::thread([this] { run(); });
  thread_id_ = thread_.get_id();
  thread_.detach();
  startControl(*this);
  startLinkWatch(*this);
}

void Fabric::add(const std::shared_ptr<Endpoint>& ep, uint32_t events) {
  {
    std::lock_guard lk(mu_);
    live_.push_back(ep);
  }
  epoll_event ev{};
  ev.events = events;
  ev.data.ptr = ep.get();
  epoll_ctl(epfd_, EPOLL_CTL_ADD, ep->fd, &ev);
}

std::vector<std::shared_ptr<Endpoint>> Fabric::endpoints() {
  std::lock_guard lk(mu_);
  return live_;
}

void Fabric::modify(Endpoint* ep, uint32_t events) {
  epoll_event ev{};
  ev.events = events;
  ev.data.ptr = ep;
  epoll_ctl(epfd_, EPOLL_CTL_MOD, ep->fd, &ev);
}

void Fabric::remove(const std::shared_ptr<Endpoint>& ep) {
  std::lock_guard lk(mu_);
  if (ep->dead) return;
  ep->dead = true;
  if (ep->fd >= 0) epoll_ctl(epfd_, EPOLL_CTL_DEL, ep->fd, nullptr);
  for (auto& l : live_) {
    if (l == ep) {
      l = std::move(live_.back());
      live_.pop_back();
      break;
    }
  }
  graveyard_.push_back(ep);
}

void Fabric::schedule(Clock::time_point when, std::function<void()> fn) {
  bool now = false;
  {
    std::lock_guard lk(mu_);
    timers_.emplace(when, std::move(fn));
    // The progress thread computes its next timeout before it waits again;
    // it needs waking only if it sleeps past `when`. A later deadline goes
    // to the timerfd, so that a thread making progress inline (a coalesced
    // ACK's timer) does not wake it now, only when the timer is due.
    if (when < sleeping_until_ && !onProgressThread()) {
      sleeping_until_ = when;
      now = when <= Clock::now();
      if (!now) {
        itimerspec its{};
        auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(when.time_since_epoch());
        its.it_value.tv_sec = static_cast<time_t>(ns.count() / 1000000000);
        its.it_value.tv_nsec = static_cast<long>(ns.count() % 1000000000);
        timerfd_settime(timerfd_, TFD_TIMER_ABSTIME, &its, nullptr);
      }
    }
  }
  if (now) wake();
}

void Fabric::wake() {
  uint64_t one = 1;
  ssize_t r = write(wakefd_, &one, sizeof one);
  (void)r;
}

void Fabric::run() {
  pthread_setname_np(pthread_self(), "softrdma");
  epoll_event evs[128];
  for (;;) {
    if (park_requests_.load() > 0) park();
    // Timers are due to the microsecond (RNR timers, coalesced ACKs).
    bool timed = false;
    timespec ts{};
    {
      std::lock_guard lk(mu_);
      sleeping_until_ = timers_.empty() ? Clock::time_point::max() : timers_.begin()->first;
      if (!timers_.empty()) {
        timed = true;
        auto d = timers_.begin()->first - Clock::now();
        if (d.count() > 0) {
          auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
          ts.tv_sec = static_cast<time_t>(ns / 1000000000);
          ts.tv_nsec = static_cast<long>(ns % 1000000000);
        }
      }
    }
    int n = epoll_pwait2(epfd_, evs, 128, timed ? &ts : nullptr, nullptr);
    if (n < 0 && errno == ENOSYS) {  // kernels before 5.11: millisecond timeouts, rounded up
      long ms = timed ? static_cast<long>(ts.tv_sec * 1000 + (ts.tv_nsec + 999999) / 1000000) : -1;
      n = epoll_wait(epfd_, evs, 128, static_cast<int>(ms));
    }
    {
      std::lock_guard lk(mu_);
      sleeping_until_ = Clock::time_point::min();  // awake: timers are looked at before it sleeps
    }
    for (int i = 0; i < n; i++) {
      auto* ep = static_cast<Endpoint*>(evs[i].data.ptr);
      if (ep == nullptr) {
        uint64_t v;
        ssize_t r = read(wakefd_, &v, sizeof v);
        r = read(timerfd_, &v, sizeof v);
        (void)r;
        continue;
      }
      if (!ep->dead) ep->onEvents(evs[i].events);
    }
    // Due timers (and posted work).
    for (;;) {
      std::function<void()> fn;
      {
        std::lock_guard lk(mu_);
        if (timers_.empty() || timers_.begin()->first > Clock::now()) break;
        fn = std::move(timers_.begin()->second);
        timers_.erase(timers_.begin());
      }
      fn();
    }
    std::vector<std::shared_ptr<Endpoint>> dead;
    {
      std::lock_guard lk(mu_);
      dead.swap(graveyard_);
    }
    dead.clear();  // closes their fds
  }
}

}  // namespace softrdma
