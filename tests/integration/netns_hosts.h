// Two hosts for integration tests — network namespaces made by the test —
// joined by one or more veth pairs ("links", one per rail): link 0 is
// 198.51.100.0/24, link 1 203.0.113.0/24, link 2 192.0.2.0/24; host 0 is .1
// and host 1 is .2 on each. Links go down and up for real (ip link set).
// Removed, with their veths, when destroyed. Needs root.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <string>
#include <utility>
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

// Hosts joined through a switch: a namespace of its own with one bridge
// per link. Host h joins links 0 .. links[h] - 1 (a host with one NIC
// beside hosts with two); on link l it is TwoHosts::ip(h, l). A host's
// port on a link goes down and up for real (both ends of its veth).
class SwitchedHosts {
 public:
  explicit SwitchedHosts(std::vector<int> links) : links_(std::move(links)) {
    tag_ = std::to_string(getpid() % 100000) + std::to_string(counter_++);
    for (size_t h = 0; h < links_.size(); h++)
      ns_.push_back("rmsg" + tag_ + "h" + std::to_string(h));
    switch_ = "rmsg" + tag_ + "sw";
  }
  ~SwitchedHosts() {
    for (const auto& n : ns_)
      sh("ip netns del " + n);
    sh("ip netns del " + switch_);
  }
  SwitchedHosts(const SwitchedHosts&) = delete;
  SwitchedHosts& operator=(const SwitchedHosts&) = delete;

  // Creates the switch and the hosts, every port up.
  bool create() {
    int most = 0;
    for (int n : links_)
      most = std::max(most, n);
    if (!sh("ip netns add " + switch_)) return false;
    for (int l = 0; l < most; l++)
      if (!sh("ip -n " + switch_ + " link add br" + std::to_string(l) + " type bridge") ||
          !sh("ip -n " + switch_ + " link set br" + std::to_string(l) + " up"))
        return false;
    for (size_t h = 0; h < links_.size(); h++) {
      if (!sh("ip netns add " + ns_[h]) || !sh("ip -n " + ns_[h] + " link set lo up")) return false;
      for (int l = 0; l < links_[h]; l++) {
        const int host = static_cast<int>(h);
        if (!sh("ip link add " + veth(host, l) + " netns " + ns_[h] + " type veth peer name " +
                port(host, l) + " netns " + switch_) ||
            !sh("ip -n " + switch_ + " link set " + port(host, l) + " master br" +
                std::to_string(l)) ||
            !sh("ip -n " + ns_[h] + " addr add " + TwoHosts::ip(host, l) + "/24 dev " +
                veth(host, l)) ||
            !setPort(host, l, true))
          return false;
      }
    }
    return true;
  }
  bool setPort(int host, int link, bool up) {
    const std::string state = up ? " up" : " down";
    return sh("ip -n " + ns_[host] + " link set " + veth(host, link) + state) &&
           sh("ip -n " + switch_ + " link set " + port(host, link) + state);
  }
  const std::string& ns(int host) const { return ns_[host]; }
  std::string veth(int host, int link) const {
    return "rm" + tag_ + "h" + std::to_string(host) + "l" + std::to_string(link);
  }
  // SOFTRDMA_DEVICES for `host`: one device per link it joins.
  std::string devices(int host) const {
    std::string list;
    for (int l = 0; l < links_[host]; l++)
      list += (list.empty() ? "" : ",") + veth(host, l);
    return list;
  }

 private:
  std::string port(int host, int link) const {
    return "rs" + tag_ + "h" + std::to_string(host) + "l" + std::to_string(link);
  }
  static inline int counter_ = 0;
  std::vector<int> links_;
  std::string tag_, switch_;
  std::vector<std::string> ns_;
};

inline bool canMakeNamespaces() {
  return geteuid() == 0 && sh("ip netns list");
}

}  // namespace rdmamsg::itest
