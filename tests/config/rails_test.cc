// Tests of rails in the configuration: `listen` and a peer's `address` as
// lists, one address per NIC, and what the loader refuses about them.
#include <gtest/gtest.h>

#include "config/loader.h"
#include "config/reload.h"
#include "config_test_util.h"

namespace rdmamsg::config {
namespace {

using test::load;
using test::onlyProblem;
using test::problemStrings;

// One mesh file for three hosts: alpha and beta have two rails, gamma one.
constexpr std::string_view kRailsFile =
    "peers:\n"                                              // 1
    "  - name: alpha\n"                                     // 2
    "    address: [198.51.100.1:7471, 203.0.113.1:7471]\n"  // 3
    "  - name: beta\n"                                      // 4
    "    address:\n"                                        // 5
    "      - 198.51.100.2:7471\n"                           // 6
    "      - 203.0.113.2:7471\n"                            // 7
    "  - name: gamma\n"                                     // 8
    "    address: 198.51.100.3:7471\n";                     // 9

TEST(RailsTest, ListsGiveOneAddressPerRailInOrder) {
  const LoadResult result = load(kRailsFile, "alpha");
  ASSERT_TRUE(result.ok()) << testing::PrintToString(problemStrings(result));
  const Config& c = result.config();
  ASSERT_EQ(c.railCount(), 2u);  // from its own entry
  EXPECT_EQ(c.listenRail(0).toString(), "198.51.100.1:7471");
  EXPECT_EQ(c.listenRail(1).toString(), "203.0.113.1:7471");
  const Peer* beta = c.findPeer("beta");
  const Peer* gamma = c.findPeer("gamma");
  ASSERT_TRUE(beta && gamma);
  ASSERT_EQ(beta->railCount(), 2u);
  EXPECT_EQ(beta->rail(0).toString(), "198.51.100.2:7471");
  EXPECT_EQ(beta->rail(1).toString(), "203.0.113.2:7471");
  EXPECT_EQ(gamma->railCount(), 1u);
  // Rail i pairs with rail i: as many as the shorter list has.
  EXPECT_EQ(c.railsWith(*beta), 2u);
  EXPECT_EQ(c.railsWith(*gamma), 1u);
  EXPECT_EQ(toString(c.listenRails()), "[198.51.100.1:7471, 203.0.113.1:7471]");
}

TEST(RailsTest, AnExplicitListenListNamesTheSameRails) {
  const LoadResult result =
      load("listen: [198.51.100.1:7471, 203.0.113.1:7471]\n" + std::string(kRailsFile), "alpha");
  ASSERT_TRUE(result.ok()) << testing::PrintToString(problemStrings(result));
  EXPECT_EQ(result.config().railCount(), 2u);

  const ConfigProblem p =
      onlyProblem(load("listen: 198.51.100.1:7471\n" + std::string(kRailsFile), "alpha"));
  EXPECT_EQ(p.line, 1);
  EXPECT_NE(p.message.find("listen: lists 1 rail(s), but this node's entry in peers (line 4) "
                           "lists 2"),
            std::string::npos)
      << p.message;
}

TEST(RailsTest, OneAddressIsOneRailAsBefore) {
  const LoadResult result = load(kRailsFile, "gamma");
  ASSERT_TRUE(result.ok()) << testing::PrintToString(problemStrings(result));
  EXPECT_EQ(result.config().railCount(), 1u);
  EXPECT_EQ(result.config().listen.toString(), "198.51.100.3:7471");
  EXPECT_EQ(toString(result.config().listenRails()), "198.51.100.3:7471");
  EXPECT_EQ(result.config().railsWith(*result.config().findPeer("alpha")), 1u);
}

TEST(RailsTest, BadListsAreRefusedAtTheEntry) {
  struct Case {
    std::string address, expect;
    int line;
  };
  const Case cases[] = {
      {"[]",
       "peers[0].address: expected one address, or a list of 1 to 8 (one per rail), got a "
       "list of 0",
       5},
      {"[198.51.100.2:7471, 0.0.0.0:7471]",
       "peers[0].address[1]: 0.0.0.0:7471 is a wildcard; a rail is one interface's own address", 5},
      {"[198.51.100.2:7471, 198.51.100.2:7471]",
       "peers[0].address[1]: 198.51.100.2:7471 is listed twice", 5},
      {"[198.51.100.2:7471, nonsense]", "peers[0].address[1]: 'nonsense': missing port", 5},
      {"[198.51.100.2:7471, [1, 2]]", "peers[0].address[1]: expected an address, got a list", 5},
      {"[198.51.100.1:7471]", "peers[0].address: duplicate peer address 198.51.100.1:7471", 5},
  };
  for (const Case& c : cases) {
    const std::string yaml =
        "node: alpha\nlisten: 198.51.100.1:7471\npeers:\n  - name: beta\n    address: " +
        c.address + "\n";
    const LoadResult result = load(yaml);
    if (c.expect.find("duplicate") != std::string::npos) {
      // beta claims alpha's own listen address.
      ASSERT_FALSE(result.ok()) << c.address;
      EXPECT_NE(problemStrings(result).front().find("is this node's listen address"),
                std::string::npos)
          << testing::PrintToString(problemStrings(result));
      continue;
    }
    const ConfigProblem p = onlyProblem(result);
    EXPECT_EQ(p.line, c.line) << c.address;
    EXPECT_NE(p.message.find(c.expect), std::string::npos) << c.address << ": " << p.message;
  }
  std::string nine = "[";
  for (int i = 1; i <= 9; i++)
    nine += (i > 1 ? ", " : "") + std::string("203.0.113.") + std::to_string(i) + ":7471";
  const ConfigProblem p = onlyProblem(
      load("node: alpha\nlisten: 198.51.100.1:7471\npeers:\n  - name: beta\n    address: " + nine +
           "]\n"));
  EXPECT_NE(p.message.find("a list of 1 to 8 (one per rail), got a list of 9"), std::string::npos)
      << p.message;
}

TEST(RailsTest, NoRailIsTwoNodes) {
  const ConfigProblem p =
      onlyProblem(load("node: alpha\nlisten: 127.0.0.1:7471\npeers:\n"
                       "  - name: beta\n    address: [198.51.100.2:7471, 203.0.113.2:7471]\n"
                       "  - name: gamma\n    address: [198.51.100.3:7471, 203.0.113.2:7471]\n"));
  EXPECT_EQ(p.line, 7);
  EXPECT_NE(p.message.find("peers[1].address: duplicate peer address 203.0.113.2:7471 (also at "
                           "line 5)"),
            std::string::npos)
      << p.message;
}

TEST(RailsTest, AReloadThatChangesAPeersRailsReaddressesIt) {
  const LoadResult before = load(kRailsFile, "alpha");
  std::string changed(kRailsFile);
  changed.replace(changed.find("203.0.113.2"), 11, "203.0.113.9");
  const LoadResult after = load(changed, "alpha");
  ASSERT_TRUE(before.ok() && after.ok());
  auto plan = planReload(before.config(), after.config());
  ASSERT_TRUE(std::holds_alternative<ReloadPlan>(plan));
  EXPECT_EQ(std::get<ReloadPlan>(plan).readdressed, (std::vector<std::string>{"beta"}));
  // A node's own rails are its listeners: they change only with a restart.
  std::string moved(kRailsFile);
  moved.replace(moved.find("203.0.113.1"), 11, "203.0.113.8");
  const LoadResult own = load(moved, "alpha");
  ASSERT_TRUE(own.ok());
  auto ownPlan = planReload(before.config(), own.config());
  ASSERT_TRUE(std::holds_alternative<ReloadPlan>(ownPlan));
  EXPECT_EQ(toString(std::get<ReloadPlan>(ownPlan).next.listenRails()),
            "[198.51.100.1:7471, 203.0.113.1:7471]");
  EXPECT_EQ(std::get<ReloadPlan>(ownPlan).restartPending,
            (std::vector<std::string>{"listen: [198.51.100.1:7471, 203.0.113.1:7471] -> "
                                      "[198.51.100.1:7471, 203.0.113.8:7471]"}));
}

}  // namespace
}  // namespace rdmamsg::config
