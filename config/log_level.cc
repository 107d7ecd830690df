// Names of the log levels and their parser.
#include "config/log_level.h"

#include <array>
#include <string>

namespace rdmamsg::config {
namespace {

constexpr std::array kAllLevels = {LogLevel::kTrace, LogLevel::kDebug, LogLevel::kInfo,
                                   LogLevel::kWarn,  LogLevel::kError, LogLevel::kCritical,
                                   LogLevel::kOff};

}  // namespace

std::string_view toString(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace:
      return "trace";
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
    case LogLevel::kCritical:
      return "critical";
    case LogLevel::kOff:
      return "off";
  }
  return "invalid";
}

Parsed<LogLevel> parseLogLevel(std::string_view text) {
  std::string names;
  for (LogLevel level : kAllLevels) {
    if (text == toString(level)) return Parsed<LogLevel>::ok(level);
    names += names.empty() ? "" : "|";
    names += toString(level);
  }
  return Parsed<LogLevel>::fail("unknown log level '" + std::string(text) + "' (expected " + names +
                                ")");
}

}  // namespace rdmamsg::config
