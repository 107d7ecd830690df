// IdleWait (idle_wait.h).
#include "client/cli/idle_wait.h"

#include <optional>

namespace rdmamsg::cli {

int IdleWait::allReadable(std::span<pollfd> fds) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
  int n = 0;
  for (pollfd& p : fds) {
    p.revents = p.fd >= 0 ? POLLIN : 0;
    n += p.fd >= 0 ? 1 : 0;
  }
  return n;
}

int IdleWait::poll(std::span<pollfd> fds, std::span<Client* const> clients, int timeoutMs) {
  if (strategy_ == IdleStrategy::sleep) {
    ++polls_;
    return ::poll(fds.data(), fds.size(), timeoutMs);
  }
  if (strategy_ == IdleStrategy::busy || timeoutMs == 0 ||
      std::chrono::steady_clock::now() - lastWork_ < kAdaptiveSpin)
    return allReadable(fds);
  for (Client* c : clients) {
    if (c != nullptr && !c->prepareToPoll()) {
      worked();  // something came while asking: drain it
      return allReadable(fds);
    }
  }
  ++polls_;
  const int rc = ::poll(fds.data(), fds.size(), timeoutMs);
  if (rc > 0) worked();
  return rc;
}

void applyIdleStrategy(Client& client, const std::string& name) {
  if (std::optional<IdleStrategy> s = parseIdleStrategy(name)) client.setIdleStrategy(*s);
}

}  // namespace rdmamsg::cli
