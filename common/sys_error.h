// The io_error Status of a failed system call: "CALL: strerror(errno)", and
// the text of an errno value for messages that say more.
#pragma once

#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>

#include "common/status.h"

namespace rdmamsg {

inline std::string errnoText(int e = errno) {
  return std::strerror(e);
}

inline Status sysError(std::string_view call) {
  return Status(Errc::io_error, std::string(call) + ": " + std::strerror(errno));
}

}  // namespace rdmamsg
