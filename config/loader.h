// The configuration loader: reads rdmamsgd's YAML file, validates it completely and
// returns either a Config or every problem found (file:line:column: message).
// The schema is documented in docs/configuration.md and config/rdmamsgd.yaml.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

#include "config/problem.h"

namespace rdmamsg::config {

// Keys accepted at the top level, in the order the reference file documents them.
inline constexpr std::array<std::string_view, 38> kTopLevelKeys = {
    "node",
    "listen",
    "socket",
    "socket_mode",
    "socket_group",
    "local_policy",
    "shared_memory",
    "idle_strategy",
    "peers",
    "secret_file",
    "previous_secret_file",
    "encryption",
    "tos",
    "rail_policy",
    "buffer_size",
    "buffer_count",
    "receive_queue",
    "shared_receive_buffers",
    "send_buffers",
    "registered_memory_limit",
    "max_message_size",
    "send_queue_limit",
    "flow_window",
    "receive_memory_limit",
    "max_subscriptions",
    "pending_limit",
    "max_peer_interest",
    "heartbeat_interval",
    "heartbeat_timeout",
    "reconnect_backoff_min",
    "reconnect_backoff_max",
    "connect_timeout",
    "message_timeout",
    "rail_probe_interval",
    "connect",
    "idle_timeout",
    "log_level",
    "metrics_listen",
};

// Keys accepted in each entry of `peers`.
inline constexpr std::array<std::string_view, 3> kPeerKeys = {"name", "address", "verify_address"};

// Loads the file at `path`. `nodeOverride` (--node NAME) replaces `node:` and must name
// an entry of `peers`; this lets one mesh file serve every host. Never throws.
LoadResult loadConfig(const std::string& path,
                      std::optional<std::string> nodeOverride = std::nullopt);

// The same from YAML text; `fileName` is used in problems and as Config::sourceFile.
LoadResult loadConfigFromString(std::string_view yaml, const std::string& fileName,
                                std::optional<std::string> nodeOverride = std::nullopt);

}  // namespace rdmamsg::config
