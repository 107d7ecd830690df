// The io_error Status of a failed system call: "CALL: strerror(errno)".
#pragma once

#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>

#include "common/status.h"

namespace rdmamsg {

inline Status sysError(std::string_view call) {
  return Status(Errc::io_error, std::string(call) + ": " + std::strerror(errno));
}

}  // namespace rdmamsg
