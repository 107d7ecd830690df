// Two hosts for integration tests — network namespaces made by the test —
// joined by one or more veth pairs ("links", one per rail): link 0 is
// 198.51.100.0/24, link 1 203.0.113.0/24, link 2 192.0.2.0/24; host 0 is .1
// and host 1 is .2 on each. Links go down and up for real (ip link set).
// Removed, with their veths, when destroyed. Needs root.
#pragma once

#include <unistd.h>

#include <string>
#include <vector>

#include "harness.h"

namespace rdmamsg::itest {

class TwoHosts {
 public:
  explicit TwoHosts(int links = 1) : links_(links) {
    std::string tag = std::to_string(getpid() % 100000) + std::to_string(counter_++);
    ns_ = {"rmsg" + tag + "a", "rmsg" + tag + "b"};
    for (int l = 0; l < links; l++) {
      const std::string suffix = l == 0 ? "" : std::to_string(l);
      veth_[0].push_back("rm" + tag + "a" + suffix);
      veth_[1].push_back("rm" + tag + "b" + suffix);
    }
  }
  ~TwoHosts() {
    for (const auto& n : ns_)
      sh("ip netns del " + n);
  }
  TwoHosts(const TwoHosts&) = delete;
  TwoHosts& operator=(const TwoHosts&) = delete;

  // Creates both hosts with every link down.
  bool create() {
    for (const auto& n : ns_)
      if (!sh("ip netns add " + n) || !sh("ip -n " + n + " link set lo up")) return false;
    for (int l = 0; l < links_; l++) {
      if (!sh("ip link add " + veth_[0][l] + " netns " + ns_[0] + " type veth peer name " +
              veth_[1][l] + " netns " + ns_[1]))
        return false;
      for (int i = 0; i < 2; i++)
        if (!sh("ip -n " + ns_[i] + " addr add " + ip(i, l) + "/24 dev " + veth_[i][l]))
          return false;
    }
    return setLink(false);
  }
  // Every link, or one: both of its ends.
  bool setLink(bool up) {
    for (int l = 0; l < links_; l++)
      if (!setLink(l, up)) return false;
    return true;
  }
  bool setLink(int link, bool up) {
    for (int i = 0; i < 2; i++)
      if (!sh("ip -n " + ns_[i] + " link set " + veth_[i][link] + (up ? " up" : " down")))
        return false;
    return true;
  }
  const std::string& ns(int host) const { return ns_[host]; }
  const std::string& veth(int host, int link = 0) const { return veth_[host][link]; }
  // SOFTRDMA_DEVICES for `host`: one device per link, as rxe over each.
  std::string devices(int host) const {
    std::string list;
    for (const auto& v : veth_[host])
      list += (list.empty() ? "" : ",") + v;
    return list;
  }
  static std::string ip(int host, int link = 0) {
    static const char* const kNets[] = {"198.51.100.", "203.0.113.", "192.0.2."};
    return kNets[link] + std::to_string(host + 1);
  }

 private:
  static inline int counter_ = 0;
  int links_;
  std::vector<std::string> ns_, veth_[2];
};

inline bool canMakeNamespaces() {
  return geteuid() == 0 && sh("ip netns list");
}

}  // namespace rdmamsg::itest
