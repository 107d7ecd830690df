// Integration: a message that cannot be delivered is answered with an error
// naming the reason and the node or service at fault — never dropped.
#include <gtest/gtest.h>

#include "harness.h"
#include "rdmamsg/client.h"

namespace rdmamsg::itest {
namespace {

std::span<const std::byte> bytes(std::string_view s) {
  return std::as_bytes(std::span(s));
}

class Errors : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(cluster_.start());
    ASSERT_TRUE(cluster_.waitFullMesh(10s));
    auto c = Client::connect(cluster_.socket("alpha"));
    ASSERT_TRUE(c) << c.status().toString();
    alpha_.emplace(std::move(*c));
  }
  Cluster cluster_{{"alpha", "beta"}};
  std::optional<Client> alpha_;
};

TEST_F(Errors, UnknownNodeIsReportedNamingTheNode) {
  Status st = alpha_->sendAndWait("gamma", "x", bytes("hi"), 5s);
  EXPECT_EQ(st.code(), Errc::unknown_node) << st.toString();
  EXPECT_NE(st.message().find("gamma"), std::string::npos) << st.toString();

  CliResult r =
      runCli(cluster_.dir(), {"--socket", cluster_.socket("alpha"), "send", "gamma/x", "hi"});
  EXPECT_EQ(r.code, 4) << r.err;
  EXPECT_NE(r.err.find("gamma"), std::string::npos) << r.err;
}

TEST_F(Errors, UnknownServiceOnARemoteNodeIsReportedNamingServiceAndNode) {
  Status st = alpha_->sendAndWait("beta", "nobody", bytes("hi"), 5s);
  EXPECT_EQ(st.code(), Errc::unknown_service) << st.toString();
  EXPECT_NE(st.message().find("beta"), std::string::npos) << st.toString();
  EXPECT_NE(st.message().find("nobody"), std::string::npos)
      << "the error does not name the service: " << st.toString();

  CliResult r =
      runCli(cluster_.dir(), {"--socket", cluster_.socket("alpha"), "send", "beta/nobody", "hi"});
  EXPECT_EQ(r.code, 5) << r.err;
  EXPECT_NE(r.err.find("nobody"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("beta"), std::string::npos) << r.err;
}

TEST_F(Errors, UnknownServiceOnTheLocalNodeIsReportedNamingServiceAndNode) {
  Status st = alpha_->sendAndWait("alpha", "nobody", bytes("hi"), 5s);
  EXPECT_EQ(st.code(), Errc::unknown_service) << st.toString();
  EXPECT_NE(st.message().find("alpha"), std::string::npos) << st.toString();
  EXPECT_NE(st.message().find("nobody"), std::string::npos) << st.toString();
}

TEST_F(Errors, PipelinedFailuresAreEachAnsweredAndDoNotDisturbGoodMessages) {
  auto listener = Taker::start(cluster_.socket("beta"), "svc");
  ASSERT_TRUE(listener);
  std::map<uint64_t, Errc> expected;
  for (int i = 0; i < 300; i++) {
    const char* node = i % 3 == 0 ? "beta" : i % 3 == 1 ? "nowhere" : "beta";
    const char* svc = i % 3 == 2 ? "nobody" : "svc";
    auto id = alpha_->send(node, svc, std::to_string(i));
    ASSERT_TRUE(id);
    expected[*id] = i % 3 == 0 ? Errc::ok : i % 3 == 1 ? Errc::unknown_node : Errc::unknown_service;
  }
  std::map<uint64_t, Errc> got;
  Completion c;
  while (got.size() < expected.size()) {
    ASSERT_TRUE(alpha_->waitCompletion(c, 10s).ok()) << got.size() << " completions";
    EXPECT_TRUE(got.emplace(c.msgId, c.status.code()).second) << "twice: " << c.msgId;
  }
  EXPECT_EQ(got, expected);
  Message m;
  for (int i = 0; i < 300; i += 3) {
    ASSERT_TRUE(listener->receive(m, 10s).ok());
    EXPECT_EQ(m.text(), std::to_string(i));
  }
}

TEST_F(Errors, StoppedPeerIsReportedUnreachableQuickly) {
  auto stopped = cluster_["beta"].stop(5s);
  ASSERT_TRUE(stopped);
  EXPECT_EQ(*stopped, 0);
  // Sent right away, while alpha may still be noticing: answered, and soon.
  auto t0 = std::chrono::steady_clock::now();
  Status st = alpha_->sendAndWait("beta", "svc", bytes("hi"), 10s);
  EXPECT_EQ(st.code(), Errc::peer_unreachable) << st.toString();
  EXPECT_NE(st.message().find("beta"), std::string::npos) << st.toString();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);

  ASSERT_TRUE(waitForStatus(cluster_.socket("alpha"),
                            [](const Json& s) { return peerState(s, "beta") != "established"; }));
  t0 = std::chrono::steady_clock::now();
  st = alpha_->sendAndWait("beta", "svc", bytes("hi"), 10s);
  EXPECT_EQ(st.code(), Errc::peer_unreachable) << st.toString();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);

  CliResult r =
      runCli(cluster_.dir(), {"--socket", cluster_.socket("alpha"), "send", "beta/svc", "hi"});
  EXPECT_EQ(r.code, 6) << r.err;
  EXPECT_NE(r.err.find("beta"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace rdmamsg::itest
