// What reloading the configuration changes in a running daemon. The file
// is loaded and validated as at start (loader.h); planReload() then compares
// it with the running configuration:
//
// - peers added, removed, or with a changed address are applied one by
//   one, leaving every other peer's connection alone;
// - the timers, limits and log level are read where they are used, so the
//   new values apply from the next use;
// - keys fixed for the daemon's life (its name, addresses, socket, buffer
//   geometry and flow window, which its peers learned in the handshake, and
//   the loop's idle strategy) keep their running value and are reported as
//   waiting for a restart.
#pragma once

#include <string>
#include <variant>
#include <vector>

#include "config/config.h"

namespace rdmamsg::config {

// Keys that take effect only when the daemon restarts.
inline constexpr std::string_view kRestartKeys[] = {"listen",
                                                    "socket",
                                                    "socket_mode",
                                                    "socket_group",
                                                    "buffer_size",
                                                    "max_message_size",
                                                    "flow_window",
                                                    "buffer_count",
                                                    "metrics_listen",
                                                    "receive_queue",
                                                    "shared_receive_buffers",
                                                    "send_buffers",
                                                    "registered_memory_limit",
                                                    "idle_strategy",
                                                    "encryption",
                                                    "tos",
                                                    "rail_policy",
                                                    "max_subscriptions",
                                                    "max_peer_interest"};

struct ReloadPlan {
  Config next;  // what the daemon runs with: the file, with the restart keys kept
  std::vector<std::string> added, removed, readdressed;  // peer names
  std::vector<std::string> changed;         // live keys whose value changed, "key: old -> new"
  std::vector<std::string> restartPending;  // restart keys the file changes, "key: old -> new"
  bool changesAnything() const {
    return !added.empty() || !removed.empty() || !readdressed.empty() || !changed.empty();
  }
};

// The plan to go from `running` to `file`, or the problem that forbids it
// (the node's name cannot change while it runs).
std::variant<ReloadPlan, std::string> planReload(const Config& running, const Config& file);

}  // namespace rdmamsg::config
