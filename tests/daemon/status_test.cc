// The status snapshot's renderers (daemon/status.h, common/openmetrics.h):
// what `rdmamsg status --json`, the text status and /metrics show is read
// off the one snapshot the layers fill.
#include <gtest/gtest.h>

#include "common/openmetrics.h"
#include "daemon/status.h"

namespace rdmamsg::status {
namespace {

peer::PeerSnapshot establishedPeer(const std::string& name, const std::string& fingerprint) {
  peer::PeerSnapshot p;
  p.name = name;
  p.address = "127.0.0.2:7471";
  p.lastError = "";
  p.state = peer::PeerState::kEstablished;
  p.counters.messagesSent = 7;
  p.deliveryLatency.observe(std::chrono::microseconds(30));   // bucket 50 µs
  p.deliveryLatency.observe(std::chrono::microseconds(200));  // bucket 250 µs
  p.flows.push_back({"svc", 100, 64, 1, true});
  p.link = peer::LinkSnapshot{0xabc, true, !fingerprint.empty(), fingerprint, 5,        8,
                              2,     {},   "aes-256-gmac",       3,           "mlx5_0", 106};
  p.link->counters.sendsPosted = 9;
  return p;
}

Snapshot twoPeers() {
  Snapshot s;
  s.node = "alpha";
  s.connectMode = "always";
  s.secret = "fp-now";
  s.previousSecret = "fp-before";
  s.mesh.peers.push_back(establishedPeer("beta", "fp-before"));
  s.mesh.peers.push_back(establishedPeer("gamma", "fp-gone"));
  s.mesh.incarnation = 0x1234;
  return s;
}

TEST(StatusJson, APeerShowsItsConnectionAndHowItWasAuthenticatedAgainstTheSecretsOfNow) {
  const nlohmann::json j = toJson(twoPeers());
  ASSERT_EQ(j["peers"].size(), 2u);
  const auto& beta = j["peers"][0];
  EXPECT_EQ(beta["name"], "beta");
  EXPECT_EQ(beta["state"], "established");
  EXPECT_EQ(beta["authenticated"], "previous secret");
  EXPECT_EQ(j["peers"][1]["authenticated"], "a secret no longer configured");
  EXPECT_EQ(beta["incarnation"], "0000000000000abc");
  EXPECT_EQ(beta["batch_protection"], "aes-256-gmac");
  EXPECT_EQ(beta["key_rotations"], 3);
  EXPECT_EQ(beta["device"], "mlx5_0");
  EXPECT_EQ(beta["traffic_class"], 106);
  EXPECT_EQ(beta["rdma"]["credits"], 5);
  EXPECT_EQ(beta["rdma"]["receive_allowance"], 8);
  EXPECT_EQ(beta["rdma"]["receive_lent"], 2);
  EXPECT_EQ(beta["rdma"]["send_wrs"], 9);
  EXPECT_FALSE(beta.contains("last_error")) << "an empty last error is left out";
  EXPECT_EQ(beta["flows"][0]["paused"], true);
  // Buckets are cumulative, as OpenMetrics wants them.
  const auto& buckets = beta["delivery_seconds"]["buckets"];
  EXPECT_EQ(buckets[0][1], 0);  // 25 µs
  EXPECT_EQ(buckets[1][1], 1);  // 50 µs
  EXPECT_EQ(buckets[3][1], 2);  // 250 µs
  EXPECT_EQ(beta["delivery_seconds"]["count"], 2);
  EXPECT_EQ(j["incarnation"], "0000000000001234");
  EXPECT_EQ(j["authentication"]["secret"], "fp-now");
}

TEST(StatusJson, APeerWithoutAConnectionHasNoRdmaSectionAndSaysWhy) {
  Snapshot s = twoPeers();
  s.mesh.peers[0].link.reset();
  s.mesh.peers[0].state = peer::PeerState::kBackoff;
  s.mesh.peers[0].lastError = "connection refused";
  s.secret.reset();
  const nlohmann::json j = toJson(s);
  EXPECT_FALSE(j["peers"][0].contains("rdma"));
  EXPECT_FALSE(j["peers"][0].contains("authenticated"));
  EXPECT_EQ(j["peers"][0]["last_error"], "connection refused");
  EXPECT_TRUE(j["authentication"]["secret"].is_null());
}

TEST(StatusMetrics, OpenMetricsIsRenderedFromTheSameSnapshot) {
  const std::string text = metrics::render(toJson(twoPeers()));
  EXPECT_NE(text.find("rdmamsg_peer_up{peer=\"beta\"} 1"), std::string::npos) << text;
  EXPECT_NE(text.find("rdmamsg_peer_delivery_seconds_count{peer=\"beta\"} 2"), std::string::npos)
      << text;
  EXPECT_NE(text.find("# EOF"), std::string::npos);
}

// Batches that failed verification, per peer and reason, in both.
TEST(StatusMetrics, RejectedBatchesAreCountedByPeerAndReason) {
  Snapshot s = twoPeers();
  s.mesh.peers[0].counters.batchesRejected[static_cast<size_t>(peer::BatchReject::kReplayed)] = 2;
  const nlohmann::json j = toJson(s);
  EXPECT_EQ(j["peers"][0]["batches_rejected"]["replayed"], 2);
  EXPECT_EQ(j["peers"][0]["batches_rejected"]["bad_mac"], 0);
  const std::string text = metrics::render(j);
  EXPECT_NE(text.find("# TYPE rdmamsg_peer_batches_rejected counter"), std::string::npos) << text;
  EXPECT_NE(text.find("rdmamsg_peer_batches_rejected_total{peer=\"beta\",reason=\"replayed\"} 2"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("rdmamsg_peer_batches_rejected_total{peer=\"gamma\",reason=\"truncated\"} 0"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace rdmamsg::status
