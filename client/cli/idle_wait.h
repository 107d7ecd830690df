// IdleWait: how the CLI's own event loops (the bench modes, which drive
// several clients from one thread) wait, following the clients' idle
// strategy (rdmamsg::IdleStrategy): sleep in poll(2) at once; spin for
// kAdaptiveSpin after the last work, then ask each client's daemon to ring
// (Client::prepareToPoll) and sleep; or never sleep.
#pragma once

#include <poll.h>

#include <chrono>
#include <span>
#include <string>

#include "rdmamsg/client.h"

namespace rdmamsg::cli {

class IdleWait {
 public:
  explicit IdleWait(IdleStrategy strategy) : strategy_(strategy) {}

  // The loop did something: an adaptive wait spins again for a while.
  void worked() { lastWork_ = std::chrono::steady_clock::now(); }
  // In place of ::poll(fds, timeoutMs): when it spins instead of sleeping,
  // every fd is reported readable (the caller drains its clients, which
  // costs no system call over shared memory). `clients` are those behind
  // `fds` (nullptr for none). Returns what poll(2) returns.
  int poll(std::span<pollfd> fds, std::span<Client* const> clients, int timeoutMs);
  // poll(2) calls made so far (the application's, beside the clients' own).
  uint64_t polls() const { return polls_; }

 private:
  static int allReadable(std::span<pollfd> fds);

  IdleStrategy strategy_;
  std::chrono::steady_clock::time_point lastWork_{};
  uint64_t polls_ = 0;
};

// The strategy named on the command line (validated by the parser), or the
// library's default (ConnectOptions, RDMAMSG_IDLE) when none was named.
// Applied after connect, so that --idle-strategy wins over RDMAMSG_IDLE.
void applyIdleStrategy(Client& client, const std::string& name);

}  // namespace rdmamsg::cli
