// Integration: rail_policy spread between two daemons on two hosts joined
// by two rails (network namespaces, real links; rail_mesh.h). Each peer
// keeps a connection per rail — a lane — and flows are hashed to lanes:
// both rails carry traffic, a lane whose rail is cut goes on over the
// other rail without loss, and comes back to its own once it is healthy.
// Needs root (ip netns); skipped otherwise.
#include <gtest/gtest.h>

#include "rail_mesh.h"

namespace rdmamsg::itest {
namespace {

constexpr int kFlows = 16;

// Messages from alpha's client to beta's services f0 .. f15 in turn, each
// flow's messages numbered; every outcome and delivery recorded.
class Flows {
 public:
  bool open(const RailMesh& m) {
    auto l = Client::connect(m.socket(1));
    auto s = Client::connect(m.socket(0));
    if (!l || !s) return false;
    for (int f = 0; f < kFlows; f++)
      if (!l->registerService("f" + std::to_string(f)).ok()) return false;
    listener_.emplace(std::move(*l));
    sender_.emplace(std::move(*s));
    return true;
  }
  void send(int n) {
    for (int i = 0; i < n; i++) {
      const int flow = next_ % kFlows;
      const std::string text = std::to_string(flow) + ":" + std::to_string(next_ / kFlows);
      next_++;
      const std::string service = "f" + std::to_string(flow);
      const auto deadline = std::chrono::steady_clock::now() + 10s;
      Result<uint64_t> id = sender_->trySend("beta", service, bytes(text));
      while (!id && id.status().code() == Errc::would_block &&
             std::chrono::steady_clock::now() < deadline) {
        pump();
        id = sender_->trySend("beta", service, bytes(text));
      }
      ASSERT_TRUE(id) << id.status().toString();
      sent_++;
    }
    (void)sender_->flush(5s);
  }
  void pump() {
    Completion comp;
    while (sender_->pollCompletion(comp)) {
      outcomes_++;
      if (!comp.status.ok()) failures_.push_back(comp.status.toString());
    }
    Message msg;
    while (listener_->tryReceive(msg)) {
      const std::string text(msg.text());
      const int flow = std::stoi(text.substr(0, text.find(':')));
      const int n = std::stoi(text.substr(text.find(':') + 1));
      EXPECT_EQ(msg.service, "f" + std::to_string(flow)) << text;
      auto& got = received_[flow];
      EXPECT_EQ(n, static_cast<int>(got.size()))
          << "flow " << flow << ": message " << n << " after " << got.size() << " (lost, "
          << "repeated or out of order)";
      got.push_back(n);
    }
    (void)sender_->processIo();
    (void)listener_->processIo();
  }
  bool settle(std::chrono::milliseconds timeout) {
    return test::waitFor([&] { return pump(), outcomes_ == sent_; }, timeout);
  }
  size_t received() {
    test::waitFor(
        [&] {
          pump();
          size_t n = 0;
          for (const auto& [f, got] : received_)
            n += got.size();
          return n >= sent_;
        },
        5s);
    size_t n = 0;
    for (const auto& [f, got] : received_)
      n += got.size();
    return n;
  }
  size_t sent() const { return sent_; }
  const std::vector<std::string>& failures() const { return failures_; }

 private:
  std::optional<Client> listener_, sender_;
  int next_ = 0;
  size_t sent_ = 0, outcomes_ = 0;
  std::vector<std::string> failures_;
  std::map<int, std::vector<int>> received_;  // per flow, the numbers in the order received
};

// Peer `name`'s lane `lane` in a status (lane 0 is the peer's entry).
const Json* laneEntry(const Json& status, const std::string& name, int lane) {
  const Json* p = peerEntry(status, name);
  if (p == nullptr || lane == 0) return p;
  if (!p->contains("lanes") || !(*p)["lanes"].is_array()) return nullptr;
  for (const Json& l : (*p)["lanes"])
    if (l.value("lane", -1) == lane) return &l;
  return nullptr;
}

// Both ends: lane `lane` established over rail `rail`.
bool laneOn(RailMesh& m, int lane, int rail, std::chrono::milliseconds timeout) {
  for (int i = 0; i < 2; i++)
    if (!waitForStatus(
            m.socket(i),
            [&](const Json& s) {
              const Json* l = laneEntry(s, m.names[1 - i], lane);
              return l != nullptr && l->value("state", "") == "established" &&
                     l->value("rail", -1) == rail;
            },
            timeout))
      return false;
  return true;
}

uint64_t railBatchesSent(const Json& lane, int rail) {
  return lane.contains("rails") ? lane["rails"].at(rail).value("batches_sent", uint64_t{0}) : 0;
}

// Two lanes, one per rail, both carrying flows; rail 1 cut mid-stream: lane
// 1 resumes over rail 0, nothing lost, repeated or reordered in any flow,
// no sender failure; rail 1 back: lane 1 returns to it.
TEST(RailsSpread, EachRailCarriesALaneAndALaneSurvivesItsRail) {
  if (!canMakeNamespaces()) GTEST_SKIP() << "needs root and ip netns";
  RailMesh m;
  m.extra = "rail_policy: spread\nrail_probe_interval: 100ms\n";
  ASSERT_TRUE(m.hosts.create());
  ASSERT_TRUE(m.hosts.setLink(true));
  ASSERT_TRUE(m.start());
  ASSERT_TRUE(laneOn(m, 0, 0, 10s)) << m.logs();
  ASSERT_TRUE(laneOn(m, 1, 1, 10s)) << m.logs();

  Flows flows;
  ASSERT_TRUE(flows.open(m));
  flows.send(800);
  ASSERT_TRUE(flows.settle(15s));
  EXPECT_TRUE(flows.failures().empty()) << flows.failures().front();
  auto status = statusOf(m.socket(0));
  ASSERT_TRUE(status);
  const Json* lane0 = laneEntry(*status, "beta", 0);
  const Json* lane1 = laneEntry(*status, "beta", 1);
  ASSERT_TRUE(lane0 != nullptr && lane1 != nullptr) << status->dump();
  EXPECT_EQ(lane0->value("lane", -1), 0);
  EXPECT_EQ((*lane0)["lanes"].size(), 1u);
  EXPECT_EQ(lane1->value("device", ""), "softrdma1");
  EXPECT_EQ(lane0->value("device", ""), "softrdma0");
  const uint64_t sent0 = lane0->value("messages_sent", uint64_t{0});
  const uint64_t sent1 = lane1->value("messages_sent", uint64_t{0});
  EXPECT_EQ(sent0 + sent1, 800u);
  EXPECT_GT(sent0, 0u) << "flows hashed to one lane only";
  EXPECT_GT(sent1, 0u) << "flows hashed to one lane only";
  EXPECT_GT(railBatchesSent(*lane0, 0), 0u);
  EXPECT_GT(railBatchesSent(*lane1, 1), 0u);
  std::string metrics = runCli(m.dir, {"--socket", m.socket(0), "metrics"}).out;
  EXPECT_NE(metrics.find("rdmamsg_peer_up{peer=\"beta\",lane=\"1\"} 1"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("rdmamsg_peer_rail{peer=\"beta\",lane=\"1\"} 1"), std::string::npos);
  EXPECT_NE(metrics.find("rdmamsg_peer_rail{peer=\"beta\",lane=\"0\"} 0"), std::string::npos);

  flows.send(400);
  ASSERT_TRUE(m.hosts.setLink(1, false));
  flows.send(800);
  EXPECT_TRUE(flows.settle(20s)) << "messages without an outcome after the cut";
  EXPECT_TRUE(flows.failures().empty()) << flows.failures().front() << "\n" << m.logs();
  EXPECT_TRUE(laneOn(m, 1, 0, 10s)) << "lane 1 did not go on over rail 0\n" << m.logs();
  flows.send(400);
  ASSERT_TRUE(flows.settle(15s));

  ASSERT_TRUE(m.hosts.setLink(1, true));
  flows.send(400);
  EXPECT_TRUE(laneOn(m, 1, 1, 20s)) << "lane 1 did not come back to rail 1\n" << m.logs();
  flows.send(400);
  ASSERT_TRUE(flows.settle(15s));
  EXPECT_TRUE(flows.failures().empty()) << flows.failures().front();
  EXPECT_EQ(flows.received(), flows.sent()) << "messages confirmed but not received";
  EXPECT_TRUE(laneOn(m, 0, 0, 1s)) << "lane 0 left its rail\n" << m.logs();
  status = statusOf(m.socket(0));
  ASSERT_TRUE(status);
  lane1 = laneEntry(*status, "beta", 1);
  ASSERT_NE(lane1, nullptr);
  EXPECT_GE(lane1->value("sessions_resumed", 0), 1) << status->dump();
  EXPECT_EQ(lane1->value("failed", -1), 0);
  EXPECT_EQ(laneEntry(*status, "beta", 0)->value("failed", -1), 0);
}

// One node with spread, the other without: lane 1 is refused with a
// reason that names the cause; lane 0 still connects.
TEST(RailsSpread, APolicyMismatchIsRefusedWithItsCause) {
  if (!canMakeNamespaces()) GTEST_SKIP() << "needs root and ip netns";
  RailMesh m;
  ASSERT_TRUE(m.hosts.create());
  ASSERT_TRUE(m.hosts.setLink(true));
  m.extra = "rail_policy: spread\n";
  ASSERT_TRUE(m.start(0));
  m.extra = "";
  ASSERT_TRUE(m.start(1));
  EXPECT_TRUE(m.d[1]->waitLog("no such lane (rail_policy or rails differ)", 10s)) << m.logs();
  EXPECT_TRUE(waitForStatus(
      m.socket(1),
      [](const Json& s) {
        return s.contains("rejected_connections") &&
               s["rejected_connections"].value("no_lane", 0) > 0;
      },
      5s))
      << statusOf(m.socket(1))->dump();
  EXPECT_TRUE(m.d[1]->waitLog("dials lane 1; this node keeps 1 with it", 1s)) << m.logs();
  EXPECT_TRUE(m.connectedOver(0, 10s)) << m.logs();
}

}  // namespace
}  // namespace rdmamsg::itest
