// Tests of the mesh rules: this node among its own peers, the --node override, where
// the listen address comes from, and uniqueness of peer names and addresses.
#include <gtest/gtest.h>

#include "config/loader.h"
#include "config_test_util.h"

namespace rdmamsg::config {
namespace {

using test::load;
using test::onlyProblem;
using test::problemStrings;

// One file for every host: no node, no listen, everyone in peers.
constexpr std::string_view kMeshFile =
    "peers:\n"                        // 1
    "  - name: alpha\n"               // 2
    "    address: 127.0.0.1:7471\n"   // 3
    "  - name: beta\n"                // 4
    "    address: 127.0.0.2:7471\n"   // 5
    "  - name: gamma\n"               // 6
    "    address: 127.0.0.3:7471\n";  // 7

std::vector<std::string> peerNames(const Config& config) {
  std::vector<std::string> names;
  for (const Peer& peer : config.peers)
    names.push_back(peer.name);
  return names;
}

TEST(MeshTest, SelfIsRemovedFromPeersAndGivesTheListenAddress) {
  const LoadResult result = load("node: beta\n" + std::string(kMeshFile));
  ASSERT_TRUE(result.ok()) << testing::PrintToString(problemStrings(result));
  EXPECT_EQ(result.config().node, "beta");
  EXPECT_EQ(result.config().listen.toString(), "127.0.0.2:7471");
  EXPECT_EQ(peerNames(result.config()), (std::vector<std::string>{"alpha", "gamma"}));
  EXPECT_EQ(result.config().findPeer("beta"), nullptr);
  ASSERT_NE(result.config().findPeer("gamma"), nullptr);
  EXPECT_EQ(result.config().findPeer("gamma")->address.toString(), "127.0.0.3:7471");
}

TEST(MeshTest, ExplicitListenWinsOverOwnEntry) {
  const LoadResult result = load("node: beta\nlisten: 0.0.0.0:7471\n" + std::string(kMeshFile));
  ASSERT_TRUE(result.ok()) << testing::PrintToString(problemStrings(result));
  EXPECT_EQ(result.config().listen.toString(), "0.0.0.0:7471");
  EXPECT_EQ(result.config().peers.size(), 2u);
}

TEST(MeshTest, NodeOverridePicksThisHostsEntry) {
  const std::pair<const char*, const char*> hosts[] = {
      {"alpha", "127.0.0.1:7471"}, {"beta", "127.0.0.2:7471"}, {"gamma", "127.0.0.3:7471"}};
  for (const auto& [node, address] : hosts) {
    const LoadResult result = load(kMeshFile, node);
    ASSERT_TRUE(result.ok()) << node << testing::PrintToString(problemStrings(result));
    EXPECT_EQ(result.config().node, node);
    EXPECT_EQ(result.config().listen.toString(), address);
    EXPECT_EQ(result.config().peers.size(), 2u);
    EXPECT_EQ(result.config().findPeer(node), nullptr);
  }
}

TEST(MeshTest, NodeOverrideReplacesNodeKey) {
  const LoadResult result = load("node: alpha\n" + std::string(kMeshFile), "gamma");
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result.config().node, "gamma");
  EXPECT_EQ(peerNames(result.config()), (std::vector<std::string>{"alpha", "beta"}));
}

TEST(MeshTest, NodeOverrideMustNameAPeer) {
  const ConfigProblem p = onlyProblem(load(kMeshFile, "delta"));
  EXPECT_EQ(p.toString(),
            "test.yaml:2:3: --node delta: no entry with that name in peers (known: alpha, beta, "
            "gamma)");
}

TEST(MeshTest, NodeOverrideMustBeAValidName) {
  const ConfigProblem p = onlyProblem(load(kMeshFile, "no/slash"));
  EXPECT_EQ(p.toString(),
            "test.yaml: --node 'no/slash': invalid node name (1..63 characters of A-Z a-z 0-9 . _ "
            "-)");
}

TEST(MeshTest, NodeIsRequiredWithoutOverride) {
  EXPECT_EQ(onlyProblem(load(kMeshFile)).message, "node: missing");
}

TEST(MeshTest, ListenIsRequiredWhenNodeHasNoEntry) {
  const ConfigProblem p = onlyProblem(load("node: delta\n" + std::string(kMeshFile)));
  EXPECT_EQ(
      p.toString(),
      "test.yaml:1:1: listen: missing, and node 'delta' has no entry in peers to take it from");
}

TEST(MeshTest, NodeWithoutEntryButWithListenIsFine) {
  const LoadResult result = load("node: delta\nlisten: 127.0.0.4:7471\n" + std::string(kMeshFile));
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result.config().peers.size(), 3u);
}

TEST(MeshTest, EmptyPeerListIsASingleHostMesh) {
  const LoadResult result = load("node: alpha\nlisten: 127.0.0.1:7471\npeers: []\n");
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE(result.config().peers.empty());
}

TEST(MeshTest, OnlySelfInPeers) {
  const LoadResult result = load("node: alpha\npeers:\n  - {name: alpha, address: 127.0.0.1:9}\n");
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE(result.config().peers.empty());
  EXPECT_EQ(result.config().listen.toString(), "127.0.0.1:9");
}

TEST(MeshTest, DuplicatePeerNamesAndAddresses) {
  const LoadResult result = load(
      "node: alpha\n"                                    // 1
      "listen: 127.0.0.1:7471\n"                         // 2
      "peers:\n"                                         // 3
      "  - {name: beta, address: '[fd00::2]:1'}\n"       // 4
      "  - {name: beta, address: '[fd00::3]:1'}\n"       // 5
      "  - {name: gamma, address: '[fd00:0::0:2]:1'}\n"  // 6
      "  - {name: delta, address: '[fd00::2]:2'}\n");    // 7
  EXPECT_EQ(problemStrings(result),
            (std::vector<std::string>{
                "test.yaml:5:12: peers[1].name: duplicate peer name 'beta' (also at line 4)",
                "test.yaml:6:28: peers[2].address: duplicate peer address [fd00::2]:1 (also at "
                "line 4)"}));
}

TEST(MeshTest, PeerMayNotClaimThisNodesListenAddress) {
  const ConfigProblem p =
      onlyProblem(load("node: alpha\nlisten: 127.0.0.1:7471\npeers:\n  - name: beta\n    address: "
                       "127.0.0.1:7471\n"));
  EXPECT_EQ(p.toString(),
            "test.yaml:5:14: peers[0].address: 127.0.0.1:7471 is this node's listen address");
}

TEST(MeshTest, InvalidOwnAddressIsReportedOnce) {
  const LoadResult result = load("node: alpha\npeers:\n  - name: alpha\n    address: 127.0.0.1\n");
  EXPECT_EQ(problemStrings(result),
            std::vector<std::string>{"test.yaml:4:14: peers[0].address: '127.0.0.1': missing port "
                                     "(expected IPv4:port)"});
}

TEST(MeshTest, PeerAddressesAreVerifiedUnlessAPeerSaysOtherwise) {
  const LoadResult result = load(
      "node: alpha\n"
      "peers:\n"
      "  - {name: alpha, address: 127.0.0.1:7471}\n"
      "  - {name: beta, address: 127.0.0.2:7471}\n"
      "  - {name: gamma, address: 127.0.0.3:7471, verify_address: false}\n");
  ASSERT_TRUE(result.ok()) << testing::PrintToString(problemStrings(result));
  EXPECT_TRUE(result.config().findPeer("beta")->verifyAddress);
  EXPECT_FALSE(result.config().findPeer("gamma")->verifyAddress);
}

TEST(MeshTest, VerifyAddressTakesOnlyTrueOrFalse) {
  const LoadResult result = load(
      "node: alpha\n"
      "peers:\n"
      "  - {name: alpha, address: 127.0.0.1:7471}\n"
      "  - {name: beta, address: 127.0.0.2:7471, verify_address: sometimes}\n");
  EXPECT_EQ(onlyProblem(result).toString(),
            "test.yaml:4:59: peers[1].verify_address: 'sometimes' is not true or false");
}

}  // namespace
}  // namespace rdmamsg::config
