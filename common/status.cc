// Names of error codes and Status formatting.
#include "common/status.h"

#include <cstdio>
#include <cstdlib>

namespace rdmamsg {

std::string_view toString(Errc code) {
  switch (code) {
    case Errc::ok:
      return "ok";
    case Errc::unknown_node:
      return "unknown_node";
    case Errc::unknown_service:
      return "unknown_service";
    case Errc::peer_unreachable:
      return "peer_unreachable";
    case Errc::too_large:
      return "too_large";
    case Errc::timeout:
      return "timeout";
    case Errc::bad_request:
      return "bad_request";
    case Errc::duplicate_service:
      return "duplicate_service";
    case Errc::busy:
      return "busy";
    case Errc::shutting_down:
      return "shutting_down";
    case Errc::protocol_error:
      return "protocol_error";
    case Errc::io_error:
      return "io_error";
    case Errc::not_connected:
      return "not_connected";
    case Errc::would_block:
      return "would_block";
    case Errc::permission_denied:
      return "permission_denied";
    case Errc::no_subscribers:
      return "no_subscribers";
    case Errc::no_responders:
      return "no_responders";
  }
  return "invalid_errc";
}

std::string Status::toString() const {
  std::string out(rdmamsg::toString(code_));
  if (!message_.empty()) {
    out += ": ";
    out += message_;
  }
  return out;
}

void abortOnResultError(const Status& status) {
  std::fprintf(stderr, "rdmamsg: value() on a failed Result: %s\n", status.toString().c_str());
  std::abort();
}

}  // namespace rdmamsg
