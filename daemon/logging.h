// The daemon's logging: spdlog behind a bounded queue, written by a thread
// of its own, so that logging from the event loop never waits on stderr or
// the journal. When the writer falls behind (a full pipe, a stalled
// journal), the oldest queued lines are dropped and counted.
#pragma once

#include <cstdint>
#include <string>

#include "config/config.h"

namespace rdmamsg::logging {

// Lines queued at most; beyond it the oldest are dropped.
constexpr size_t kQueueLines = 8192;

// Installs the default logger ("rdmamsgd") writing to stderr: under systemd
// (JOURNAL_STREAM set) with only the syslog priority prefix the journal
// understands, otherwise with a timestamp.
void setup(config::LogLevel level);
// Lines dropped because the writer fell behind (0 before setup()).
uint64_t dropped();
// Lines left out by rate limits (LogLimit).
uint64_t suppressed();
// Writes what is queued and stops the writer; call before exiting.
void shutdown();
// An invariant is broken: `line` goes to the log and, synchronously, to
// stderr (the queued copy could be lost with the process), then abort().
[[noreturn]] void fatal(const std::string& line);

}  // namespace rdmamsg::logging
