// SendCheck: names and size of a message checked before it is queued.
#include "client/send_check.h"

#include "common/local_protocol.h"

namespace rdmamsg::client {

Status checkName(std::string_view kind, std::string_view name) {
  if (proto::isValidName(name)) return {};
  return Status(Errc::bad_request, "invalid " + std::string(kind) + " name '" + std::string(name) +
                                       "' (1-63 characters of A-Z a-z 0-9 . _ -)");
}

Status SendCheck::check(std::string_view node, std::string_view service,
                        std::string_view fromService, size_t size, uint32_t maxMessage) {
  // The names remembered start empty, which is not a valid name: an empty
  // name is checked too.
  if (node != node_ || node.empty()) {
    if (Status st = checkName("node", node); !st.ok()) return st;
    node_.assign(node);
  }
  if (service != service_ || service.empty()) {
    if (Status st = checkName("service", service); !st.ok()) return st;
    service_.assign(service);
  }
  if (!fromService.empty()) {
    if (Status st = checkName("service", fromService); !st.ok()) return st;
  }
  return checkSize(size, maxMessage);
}

Status checkSize(size_t size, uint32_t maxMessage) {
  if (size <= maxMessage) return Status();
  return Status(Errc::too_large, "message of " + std::to_string(size) +
                                     " bytes exceeds the maximum of " + std::to_string(maxMessage));
}

}  // namespace rdmamsg::client
