// The daemon's logging (logging.h).
#include "daemon/logging.h"

#include "common/state_machine.h"

#include <spdlog/async.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "common/log_limit.h"

namespace rdmamsg::logging {
namespace {

// %* : the line's syslog priority, as journald reads a "<N>" prefix on a
// stream (sd-daemon(3)): debug 7, info 6, warning 4, error 3, critical 2.
class JournalPriority final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    char digit = '6';
    switch (msg.level) {
      case spdlog::level::trace:
      case spdlog::level::debug:
        digit = '7';
        break;
      case spdlog::level::info:
        digit = '6';
        break;
      case spdlog::level::warn:
        digit = '4';
        break;
      case spdlog::level::err:
        digit = '3';
        break;
      default:
        digit = '2';
        break;
    }
    dest.push_back(digit);
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JournalPriority>();
  }
};

// Standard error is the journal's stream: JOURNAL_STREAM names its device
// and inode (systemd.exec(5)), and they are still stderr's, not those of a
// file a child of a service redirected it to.
bool stderrIsJournal() {
  const char* stream = std::getenv("JOURNAL_STREAM");
  unsigned long long dev = 0, ino = 0;
  if (stream == nullptr || std::sscanf(stream, "%llu:%llu", &dev, &ino) != 2) return false;
  struct stat st {};
  return fstat(STDERR_FILENO, &st) == 0 && st.st_dev == dev && st.st_ino == ino;
}

}  // namespace

void setup(config::LogLevel level) {
  // Every state machine's transitions (common/state_machine.h): logged at
  // debug, an edge a machine does not have stops the daemon.
  state_machine::setObserver({[](std::string_view who, std::string_view from, std::string_view to) {
                                spdlog::debug("{}: {} -> {}", who, from, to);
                              },
                              [](const std::string& line) { fatal(line); }});
  spdlog::init_thread_pool(kQueueLines, 1);
  auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  auto logger =
      std::make_shared<spdlog::async_logger>("rdmamsgd", std::move(sink), spdlog::thread_pool(),
                                             spdlog::async_overflow_policy::overrun_oldest);
  if (stderrIsJournal()) {
    auto formatter = std::make_unique<spdlog::pattern_formatter>();
    formatter->add_flag<JournalPriority>('*').set_pattern("<%*>%v");
    logger->set_formatter(std::move(formatter));
  } else
    logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %^%l%$ %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(std::string(config::toString(level))));
  // Flushing happens on the writer thread: lines reach the journal promptly
  // without the loop ever waiting for it.
  spdlog::flush_on(spdlog::level::info);
}

uint64_t dropped() {
  auto pool = spdlog::thread_pool();
  return pool ? pool->overrun_counter() : 0;
}

uint64_t suppressed() {
  return logLinesSuppressed();
}

void shutdown() {
  spdlog::shutdown();
}

void fatal(const std::string& line) {
  spdlog::critical("{}", line);
  std::fprintf(stderr, "%s%s\n", stderrIsJournal() ? "<2>" : "", line.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace rdmamsg::logging
