// Internal to the loader: reads the `local_policy` key (local_policy.h) and
// reports every problem with its position. User and group names are resolved
// here (getpwnam_r, getgrnam_r): an unknown one is a problem of the file.
#pragma once

#include <optional>

#include "config/local_policy.h"
#include "config/yaml_fields.h"

namespace rdmamsg::config::detail {

// Sets `out` when the file has `local_policy`; leaves it unset otherwise.
void readLocalPolicy(const FieldMap& top, std::optional<LocalPolicy>& out);

}  // namespace rdmamsg::config::detail
