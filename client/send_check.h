// SendCheck: what a message must be before the library queues it — node
// and service names the protocol allows, a size within the daemon's
// maximum. A stream names the same destination every time: the last valid
// names are remembered and not checked again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "rdmamsg/status.h"

namespace rdmamsg::client {

// ok, or bad_request naming the kind ("node", "service") and the rule.
Status checkName(std::string_view kind, std::string_view name);

// ok, or too_large when `size` is above the daemon's maxMessage.
Status checkSize(size_t size, uint32_t maxMessage);

class SendCheck {
 public:
  // ok, bad_request (a name) or too_large (above maxMessage).
  Status check(std::string_view node, std::string_view service, std::string_view fromService,
               size_t size, uint32_t maxMessage);

 private:
  // The names last found valid (empty at first, which is not a valid name).
  std::string node_, service_;
};

}  // namespace rdmamsg::client
