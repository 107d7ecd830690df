// SIGINT and SIGTERM: a flag (stop_signal.h).
#include "client/cli/stop_signal.h"

#include <csignal>

namespace rdmamsg::cli {
namespace {

volatile std::sig_atomic_t gStop = 0;

void onStopSignal(int) {
  gStop = 1;
}

}  // namespace

void installStopHandlers() {
  struct sigaction sa {};
  sa.sa_handler = onStopSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

bool stopRequested() {
  return gStop != 0;
}

}  // namespace rdmamsg::cli
