// SIGINT and SIGTERM for the rdmamsg commands that run until stopped
// (listen, sub, reply, bench): a flag, and blocking waits interrupted (no
// SA_RESTART), so that a command finishes what it holds and exits 0.
#pragma once

namespace rdmamsg::cli {

void installStopHandlers();
bool stopRequested();

}  // namespace rdmamsg::cli
