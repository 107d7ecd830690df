// rdmamsg::config::LogLevel: the `log_level` setting. The names are spdlog's, so the
// daemon can pass toString(level) to spdlog::level::from_str unchanged.
#pragma once

#include <string_view>

#include "config/parsed.h"

namespace rdmamsg::config {

enum class LogLevel { kTrace, kDebug, kInfo, kWarn, kError, kCritical, kOff };

// "trace", "debug", "info", "warn", "error", "critical" or "off".
std::string_view toString(LogLevel level);

// Accepts exactly the names toString() returns.
Parsed<LogLevel> parseLogLevel(std::string_view text);

}  // namespace rdmamsg::config
