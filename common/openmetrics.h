// The daemon's status (the JSON of `rdmamsg status --json`) as an
// OpenMetrics 1.0 text exposition, for Prometheus: what rdmamsgd serves on
// its metrics listener and `rdmamsg metrics` prints. One renderer for both,
// so the two never differ.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace rdmamsg::metrics {

// The content type of the exposition.
inline constexpr std::string_view kContentType =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

// Renders `status`; fields it lacks are left out. Ends with "# EOF".
std::string render(const nlohmann::json& status);

}  // namespace rdmamsg::metrics
