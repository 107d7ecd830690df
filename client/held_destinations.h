// HeldDestinations: the destinations (node and service) rdmamsgd told this
// client to HOLD — their listener does not keep up — until it RESUMEs
// them. send() to a held destination waits for its RESUME, trySend()
// returns would_block; other destinations go on. Few are held at once: a
// short list.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rdmamsg::client {

class HeldDestinations {
 public:
  bool isHeld(std::string_view node, std::string_view service) const {
    return std::any_of(held_.begin(), held_.end(),
                       [&](const auto& d) { return d.first == node && d.second == service; });
  }
  bool empty() const { return held_.empty(); }

  // HOLD (on) or RESUME (off); a repeated one changes nothing.
  void set(std::string_view node, std::string_view service, bool on) {
    if (on == isHeld(node, service)) return;
    if (on) {
      held_.emplace_back(node, service);
      return;
    }
    std::erase_if(held_, [&](const auto& d) { return d.first == node && d.second == service; });
  }

 private:
  std::vector<std::pair<std::string, std::string>> held_;
};

}  // namespace rdmamsg::client
