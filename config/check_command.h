// `rdmamsgd --check-config FILE [--node NAME]`: validates a configuration file and
// reports the outcome in the form scripts and operators expect.
#pragma once

#include <optional>
#include <ostream>
#include <string>

namespace rdmamsg::config {

// sysexits.h EX_CONFIG: returned when the configuration has problems.
inline constexpr int kExitConfig = 78;

// Loads `path` (with `node` as the --node override). On problems, prints each on its own
// line to `err` ("file:line:column: message") and returns kExitConfig. Otherwise prints one
// summary line (node, listen address, number of peers) to `out` and returns 0.
int checkConfigCommand(const std::string& path, std::optional<std::string> node, std::ostream& out,
                       std::ostream& err);

}  // namespace rdmamsg::config
