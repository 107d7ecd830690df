// The "local" spdlog logger used by the local client server. The daemon may
// register its own logger named "local" before the first session starts;
// otherwise a clone of the default logger is registered under that name.
#pragma once

#include <spdlog/spdlog.h>

#include <memory>

namespace rdmamsg::local {

inline spdlog::logger& localLog() {
  static const std::shared_ptr<spdlog::logger> logger = [] {
    auto existing = spdlog::get("local");
    if (existing) return existing;
    auto made = spdlog::default_logger()->clone("local");
    spdlog::register_logger(made);
    return made;
  }();
  return *logger;
}

}  // namespace rdmamsg::local
