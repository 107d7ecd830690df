// rpoll and rselect: rsockets and ordinary descriptors in one wait (rsocket(7)). An rsocket's
// events are computed from its state; while none is ready the caller sleeps in poll() on the
// rsocket's eventfd (POLLIN, a connect finishing) and its TCP socket (POLLOUT, errors), with the
// ordinary descriptors, and looks again when any of them wakes it.
#include <rdma/rsocket.h>

#include <cerrno>
#include <chrono>
#include <vector>

#include "base.h"
#include "rsocket.h"
#include "rsocket_sys.h"

using namespace softrdma;
using namespace softrdma::rs;

namespace {

// What `r` reports for `events` now (mu held). A finished connect counts as seen.
short readyEvents(RSocket& r, short events) {
  switch (r.state) {
    case State::Listening:
      return r.accept_queue.empty() ? 0 : short(events & POLLIN);
    case State::Failed:
      return short(POLLERR | (events & (POLLIN | POLLOUT)));
    case State::Connected:
      break;
    default:
      return 0;
  }
  if (r.conn_event) {
    r.conn_event = false;
    r.updateLevel();
  }
  short rv = 0;
  if (r.err != 0) rv |= POLLERR | POLLHUP;
  if ((events & POLLIN) && (r.rx.r_len > 0 || r.rx.rd_eof || r.rx.rd_shut || r.err != 0))
    rv |= POLLIN;
  if ((events & POLLRDHUP) && r.rx.rd_eof) rv |= POLLRDHUP;
  if (r.rx.rd_eof && r.tx.wr_shut) rv |= POLLHUP;
  if ((events & POLLOUT) && !r.tx.wr_shut && r.err == 0) {
    r.flushTx();
    pollfd p{r.fd, POLLOUT, 0};
    if (!r.txBusy() && sys::poll(&p, 1, 0) == 1 && (p.revents & POLLOUT)) rv |= POLLOUT;
  }
  return rv;
}

// The descriptors to sleep on for `r` (mu held): up to two entries appended to `w`.
void waitSet(RSocket& r, short events, std::vector<pollfd>& w) {
  switch (r.state) {
    case State::Listening:
      if (events & POLLIN) w.push_back({r.evfd, POLLIN, 0});
      break;
    case State::Connecting:
    case State::Accepting:
      w.push_back({r.evfd, POLLIN, 0});
      break;
    case State::Connected:
      if (events & POLLIN) w.push_back({r.evfd, POLLIN, 0});
      w.push_back({r.fd, short(events & POLLOUT), 0});
      break;
    default:
      break;
  }
}

struct Entry {
  std::shared_ptr<RSocket> r;  // null: an ordinary descriptor
};

// Fills revents of every entry without sleeping; the number ready.
int check(pollfd* fds, nfds_t n, const std::vector<Entry>& e) {
  int count = 0;
  for (nfds_t i = 0; i < n; i++) {
    if (e[i].r) {
      std::lock_guard lk(e[i].r->mu);
      fds[i].revents = readyEvents(*e[i].r, fds[i].events);
    } else {
      fds[i].revents = 0;
      if (fds[i].fd >= 0) sys::poll(&fds[i], 1, 0);
    }
    if (fds[i].revents != 0) count++;
  }
  return count;
}

}  // namespace

SOFTRDMA_API int rpoll(pollfd* fds, nfds_t nfds, int timeout) {
  if (nfds > 0 && fds == nullptr) return setErr(EFAULT);
  std::vector<Entry> e(nfds);
  for (nfds_t i = 0; i < nfds; i++)
    e[i].r = find(fds[i].fd);
  const auto start = std::chrono::steady_clock::now();
  std::vector<pollfd> w;
  for (;;) {
    int count = check(fds, nfds, e);
    if (count > 0 || timeout == 0) return count;
    w.clear();
    for (nfds_t i = 0; i < nfds; i++) {
      if (e[i].r) {
        std::lock_guard lk(e[i].r->mu);
        waitSet(*e[i].r, fds[i].events, w);
      } else {
        w.push_back({fds[i].fd, fds[i].events, 0});
      }
    }
    int left = -1;
    if (timeout > 0) {
      auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::steady_clock::now() - start)
                       .count();
      if (spent >= timeout) return 0;
      left = timeout - static_cast<int>(spent);
    }
    if (sys::poll(w.data(), w.size(), left) < 0) return -1;  // EINTR, as poll
  }
}

SOFTRDMA_API int rselect(int nfds, fd_set* readfds, fd_set* writefds, fd_set* exceptfds,
                         timeval* timeout) {
  if (nfds < 0 || nfds > FD_SETSIZE) return setErr(EINVAL);
  if (timeout != nullptr && (timeout->tv_sec < 0 || timeout->tv_usec < 0)) return setErr(EINVAL);
  std::vector<pollfd> fds;
  for (int fd = 0; fd < nfds; fd++) {
    short ev = 0;
    if (readfds != nullptr && FD_ISSET(fd, readfds)) ev |= POLLIN;
    if (writefds != nullptr && FD_ISSET(fd, writefds)) ev |= POLLOUT;
    if (exceptfds != nullptr && FD_ISSET(fd, exceptfds)) ev |= POLLPRI;
    if (ev != 0) fds.push_back({fd, ev, 0});
  }
  int ms = -1;
  if (timeout != nullptr)
    ms = static_cast<int>(timeout->tv_sec * 1000 + (timeout->tv_usec + 999) / 1000);
  int n = rpoll(fds.data(), fds.size(), ms);
  if (n < 0) return n;
  if (readfds != nullptr) FD_ZERO(readfds);
  if (writefds != nullptr) FD_ZERO(writefds);
  if (exceptfds != nullptr) FD_ZERO(exceptfds);
  int count = 0;
  for (const auto& p : fds) {
    if (readfds != nullptr && (p.events & POLLIN) && (p.revents & (POLLIN | POLLHUP | POLLERR))) {
      FD_SET(p.fd, readfds);
      count++;
    }
    if (writefds != nullptr && (p.events & POLLOUT) && (p.revents & (POLLOUT | POLLERR))) {
      FD_SET(p.fd, writefds);
      count++;
    }
    if (exceptfds != nullptr && (p.events & POLLPRI) && (p.revents & POLLPRI)) {
      FD_SET(p.fd, exceptfds);
      count++;
    }
  }
  return count;
}
