// Zero-copy publishes (Client::claimPublish) across two real daemons:
// claimed publishes reach subscribers on both hosts intact and in order
// between ordinary publishes, each confirmed as taken by both; over shared
// memory the large ones lie in the payload area and the publishing daemon
// copies only their frames' heads from the client; an aborted claim
// publishes nothing; misuse is refused.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "harness.h"
#include "rdmamsg/client.h"
#include "rdmamsg/rdmamsg.h"

namespace rdmamsg::itest {
namespace {

size_t sizeOf(uint64_t i) {
  return i % 3 == 1 ? (size_t{256} << 10) + i * 7 : i % 3 == 2 ? 20000 + i : 100 + i;
}
std::byte byteOf(uint64_t i, size_t j) {
  return static_cast<std::byte>((i * 131 + j * 7) & 0xff);
}
void fill(uint64_t i, std::span<std::byte> p) {
  for (size_t j = 0; j < p.size(); ++j)
    p[j] = byteOf(i, j);
}
bool intact(uint64_t i, std::span<const std::byte> got) {
  if (got.size() != sizeOf(i)) return false;
  for (size_t j = 0; j < got.size(); ++j)
    if (got[j] != byteOf(i, j)) return false;
  return true;
}

Client connectTo(const std::string& socket) {
  auto c = Client::connect(socket);
  EXPECT_TRUE(c.ok()) << c.status().toString();
  return std::move(*c);
}

uint64_t clientInBytes(const std::string& socket) {
  std::optional<Json> s = statusOf(socket);
  if (!s || !s->contains("copies")) return 0;
  return (*s)["copies"].value("client_in_bytes", uint64_t{0});
}

class PublishClaim : public ::testing::Test {
 protected:
  Cluster cluster{{"alpha", "beta"}};
  void SetUp() override {
    ASSERT_TRUE(cluster.start());
    ASSERT_TRUE(cluster.waitFullMesh());
  }
  // Subscribes on both hosts and waits until alpha's publishes match both.
  void subscribeBoth(Client& onAlpha, Client& onBeta, Client& publisher) {
    ASSERT_TRUE(onAlpha.subscribe("claims.>").ok());
    ASSERT_TRUE(onBeta.subscribe("claims.>").ok());
    // Interest crosses the mesh: probe until a publish matches both (its
    // completion comes once the subscribers took it).
    Message m;
    bool both = false;
    for (int attempt = 0; attempt < 50 && !both; ++attempt) {
      Result<uint64_t> id = publisher.publish("claims.probe", "probe");
      ASSERT_TRUE(id.ok()) << id.status().toString();
      ASSERT_TRUE(publisher.flush(10s).ok());  // publishes are batched as sends are
      ASSERT_TRUE(onAlpha.receive(m, 10s).ok());
      const bool atBeta = onBeta.receive(m, 200ms).ok();
      Completion c;
      ASSERT_TRUE(publisher.waitCompletion(c, 10s).ok());
      EXPECT_EQ(c.matched, atBeta ? 2u : 1u);
      both = atBeta;
    }
    ASSERT_TRUE(both) << "beta's subscription never reached alpha";
  }
};

TEST_F(PublishClaim, ClaimedPublishesReachBothHostsIntactAndInOrder) {
  Client sa = connectTo(cluster.socket("alpha"));
  Client sb = connectTo(cluster.socket("beta"));
  Client pub = connectTo(cluster.socket("alpha"));
  subscribeBoth(sa, sb, pub);
  constexpr uint64_t kCount = 30;
  uint64_t inPlace = 0, inPlaceBytes = 0;
  const uint64_t copiedBefore = clientInBytes(cluster.socket("alpha"));
  std::vector<std::byte> buf;
  for (uint64_t i = 0; i < kCount; ++i) {
    if (i % 2 == 0) {
      buf.resize(sizeOf(i));
      fill(i, buf);
      ASSERT_TRUE(pub.publish("claims.x", buf).ok()) << i;
      continue;
    }
    SendClaim claim;
    ASSERT_TRUE(pub.claimPublish(claim, "claims.x", sizeOf(i)).ok()) << i;
    ASSERT_EQ(claim.payload.size(), sizeOf(i));
    fill(i, claim.payload);
    if (claim.inPlace) {
      ++inPlace;
      inPlaceBytes += sizeOf(i);
    }
    Result<uint64_t> id = pub.commit(claim);
    ASSERT_TRUE(id.ok()) << id.status().toString();
    EXPECT_EQ(claim.handle, 0u) << "a committed claim still holds";
  }
  ASSERT_TRUE(pub.flush(30s).ok());
  Message m;
  for (Client* sub : {&sa, &sb}) {
    for (uint64_t i = 0; i < kCount; ++i) {
      ASSERT_TRUE(sub->receive(m, 30s).ok()) << i;
      EXPECT_EQ(m.subject, "claims.x");
      ASSERT_TRUE(intact(i, m.payload)) << "publish " << i << " of " << m.payload.size();
    }
  }
  for (uint64_t i = 0; i < kCount; ++i) {
    Completion c;
    ASSERT_TRUE(pub.waitCompletion(c, 30s).ok()) << i;
    EXPECT_TRUE(c.status.ok()) << c.status.toString();
    EXPECT_EQ(c.matched, 2u);
    EXPECT_EQ(c.taken, 2u);
  }
  if (pub.usesSharedMemory()) {
    EXPECT_GT(inPlace, 0u) << "no large publish claim lay in the payload area";
    uint64_t total = 0;
    for (uint64_t i = 0; i < kCount; ++i)
      total += sizeOf(i);
    // What the daemon copied from its clients: every payload but those the
    // claims left in the payload area (plus heads and the other frames).
    const uint64_t copied = clientInBytes(cluster.socket("alpha")) - copiedBefore;
    EXPECT_LT(copied, total - inPlaceBytes + 64 * 1024)
        << "the daemon copied the in-place payloads (" << inPlaceBytes << " bytes)";
    std::printf("claims in place: %llu (%llu bytes); the daemon copied %llu of %llu bytes\n",
                static_cast<unsigned long long>(inPlace),
                static_cast<unsigned long long>(inPlaceBytes),
                static_cast<unsigned long long>(copied), static_cast<unsigned long long>(total));
  } else {
    EXPECT_EQ(inPlace, 0u) << "over the socket a claim is a private buffer";
  }
}

TEST_F(PublishClaim, AnAbortedClaimPublishesNothingAndMisuseIsRefused) {
  Client sa = connectTo(cluster.socket("alpha"));
  Client sb = connectTo(cluster.socket("beta"));
  Client pub = connectTo(cluster.socket("alpha"));
  subscribeBoth(sa, sb, pub);
  SendClaim claim;
  ASSERT_TRUE(pub.claimPublish(claim, "claims.aborted", 100000).ok());
  fill(1, claim.payload);
  SendClaim second;
  EXPECT_EQ(pub.claimPublish(second, "claims.x", 10).code(), Errc::bad_request)
      << "a second claim while one is held";
  EXPECT_EQ(pub.claim(second, "beta", "svc", 10).code(), Errc::bad_request);
  ASSERT_TRUE(pub.abort(claim).ok());
  EXPECT_EQ(pub.abort(claim).code(), Errc::bad_request) << "aborted twice";
  EXPECT_EQ(pub.claimPublish(second, "claims.*", 10).code(), Errc::bad_request)
      << "a wildcard is no subject to publish to";
  EXPECT_EQ(pub.claimPublish(second, "", 10).code(), Errc::bad_request);
  EXPECT_EQ(pub.claimPublish(second, "claims.x", size_t{64} << 20).code(), Errc::too_large);
  // Nothing of the aborted claim arrives: the next publish is the first.
  ASSERT_TRUE(pub.claimPublish(second, "claims.after", 5).ok());
  std::memcpy(second.payload.data(), "after", 5);
  ASSERT_TRUE(pub.commit(second).ok());
  ASSERT_TRUE(pub.flush(10s).ok());
  Message m;
  for (Client* sub : {&sa, &sb}) {
    ASSERT_TRUE(sub->receive(m, 10s).ok());
    EXPECT_EQ(m.subject, "claims.after");
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(m.payload.data()), m.payload.size()),
              "after");
  }
  Completion c;
  ASSERT_TRUE(pub.waitCompletion(c, 10s).ok());
  EXPECT_TRUE(c.status.ok()) << c.status.toString();
  EXPECT_EQ(c.taken, 2u);
}

// The same from C: rdmamsg_claim_publish(), written in place, committed.
TEST_F(PublishClaim, TheCApiClaimsAPublish) {
  Client sa = connectTo(cluster.socket("alpha"));
  Client sb = connectTo(cluster.socket("beta"));
  Client probe = connectTo(cluster.socket("alpha"));
  subscribeBoth(sa, sb, probe);
  rdmamsg_client* c = nullptr;
  ASSERT_EQ(rdmamsg_connect(cluster.socket("alpha").c_str(), "c-publisher", 5000, &c), RDMAMSG_OK);
  void* at = nullptr;
  const size_t size = sizeOf(1);
  ASSERT_EQ(rdmamsg_claim_publish(c, "claims.c", size, &at), RDMAMSG_OK);
  ASSERT_NE(at, nullptr);
  fill(1, std::span(static_cast<std::byte*>(at), size));
  void* again = nullptr;
  EXPECT_EQ(rdmamsg_claim_publish(c, "claims.c", 10, &again), RDMAMSG_BAD_REQUEST);
  uint64_t id = 0;
  ASSERT_EQ(rdmamsg_commit(c, &id), RDMAMSG_OK);
  EXPECT_NE(id, 0u);
  EXPECT_EQ(rdmamsg_claim_publish(c, nullptr, 10, &at), RDMAMSG_BAD_REQUEST);
  ASSERT_EQ(rdmamsg_flush(c, 10000), RDMAMSG_OK);
  Message m;
  for (Client* sub : {&sa, &sb}) {
    ASSERT_TRUE(sub->receive(m, 10s).ok());
    EXPECT_EQ(m.subject, "claims.c");
    EXPECT_TRUE(intact(1, m.payload));
  }
  rdmamsg_completion done{};
  ASSERT_EQ(rdmamsg_wait_completion(c, &done, 10000), RDMAMSG_OK);
  EXPECT_EQ(done.msg_id, id);
  EXPECT_EQ(done.code, RDMAMSG_OK);
  EXPECT_EQ(done.taken, 2u);
  rdmamsg_close(c);
}

}  // namespace
}  // namespace rdmamsg::itest
