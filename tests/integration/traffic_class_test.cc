// Integration: `tos` (docs/configuration.md, "Traffic class"). With
// `tos: 106` every connection between the daemons carries that traffic
// class: each daemon's status reads it back from its queue pair, and the
// connections softrdma carries them on show it in their IP header's DSCP
// (on TCP the kernel keeps the two ECN bits for itself). Without the key
// the device's default, 0, stays.
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>

#include "harness.h"
#include "tests/support/wait.h"

namespace rdmamsg::itest {
namespace {

// The traffic class status shows for each peer of `node`, by peer name.
std::map<std::string, int> trafficClasses(Cluster& c, const std::string& node) {
  std::map<std::string, int> out;
  const auto status = statusOf(c.socket(node));
  if (!status) return out;
  for (const Json& p : (*status)["peers"])
    if (p.contains("traffic_class")) out[p.value("name", "")] = p["traffic_class"].get<int>();
  return out;
}

// The ToS bytes of the established TCP connections to or from the mesh's
// port (`ss --tos`): softrdma's transport under the RC connections.
std::multiset<int> wireTos(Cluster& c) {
  Process p;
  Process::Options o;
  const std::string port = std::to_string(c.port());
  o.argv = {"/usr/bin/env",
            "ss",
            "-Htn",
            "--tos",
            "state",
            "established",
            "( sport = :" + port + " or dport = :" + port + " )"};
  o.stdoutPath = c.dir().file("ss.out");
  std::multiset<int> out;
  if (!p.start(o) || p.wait(10s).value_or(-1) != 0) return out;
  const std::string text = readFile(o.stdoutPath);
  const std::regex tos("tos:(0x[0-9a-f]+|0)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), tos); it != std::sregex_iterator();
       ++it)
    out.insert(std::stoi((*it)[1].str(), nullptr, 0));
  return out;
}

TEST(TrafficClass, EveryConnectionCarriesTheConfiguredTos) {
  MeshOptions o;
  o.extra = "tos: 106\n";
  Cluster c({"alpha", "beta", "gamma"}, o);
  ASSERT_TRUE(c.start());
  ASSERT_TRUE(c.waitFullMesh(10s));
  for (const std::string node : {"alpha", "beta", "gamma"}) {
    std::map<std::string, int> classes;
    ASSERT_TRUE(rdmamsg::test::waitFor(
        [&] {
          classes = trafficClasses(c, node);
          return classes.size() == 2;
        },
        5s))
        << node << ": " << testing::PrintToString(classes);
    for (const auto& [peer, tc] : classes)
      EXPECT_EQ(tc, 106) << node << " -> " << peer;
  }
  // Dialed and accepted ends alike, in the packets' DSCP (106 = DSCP 26 << 2 | ECN 2).
  const std::multiset<int> wire = wireTos(c);
  ASSERT_FALSE(wire.empty());
  for (int tos : wire)
    EXPECT_EQ(tos & ~3, 106 & ~3) << testing::PrintToString(wire);
}

TEST(TrafficClass, UnsetLeavesTheDevicesDefault) {
  Cluster c({"alpha", "beta"});
  ASSERT_TRUE(c.start());
  ASSERT_TRUE(c.waitFullMesh(10s));
  std::map<std::string, int> classes;
  ASSERT_TRUE(rdmamsg::test::waitFor(
      [&] {
        classes = trafficClasses(c, "alpha");
        return classes.size() == 1;
      },
      5s));
  EXPECT_EQ(classes["beta"], 0);
  for (int tos : wireTos(c))
    EXPECT_EQ(tos, 0);
}

}  // namespace
}  // namespace rdmamsg::itest
