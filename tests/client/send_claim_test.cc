// librdmamsg's zero-copy send (Client::claim, commit, abort) against an
// in-test LocalServer: claimed messages arrive intact and in order between
// ordinary sends, large claims lie in the shared payload area, an aborted
// claim sends nothing and gives its bytes back, and misuse is answered
// with an error. Runs over shared memory and, with the "socket." prefix,
// over the socket (claims then lie in a private buffer).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "rdmamsg/client.h"
#include "rdmamsg/rdmamsg.h"
#include "test_server.h"

namespace rdmamsg {
namespace {

using namespace std::chrono_literals;
using test::ThreadedServer;

constexpr uint32_t kMaxMessage = 8u << 20;

size_t sizeOf(uint64_t i) {
  return i % 5 == 2 ? (size_t{1} << 20) + i * 11 : i % 5 == 4 ? 20000 + i : 1 + (i * 37) % 3000;
}
std::byte byteOf(uint64_t i, size_t j) {
  return static_cast<std::byte>((i * 131 + j) & 0xff);
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

Client connectAs(const ThreadedServer& server, const char* service) {
  auto c = Client::connect(server.socket());
  EXPECT_TRUE(c.ok()) << c.status().toString();
  EXPECT_TRUE(c->registerService(service).ok());
  return std::move(*c);
}

// Every other message is claimed, filled in place and committed, the rest
// sent with send(): the listener gets all of them intact, in the order of
// the calls, and every sender's completion is ok.
TEST(SendClaimTest, ClaimedMessagesArriveIntactAndInOrderBetweenSends) {
  ThreadedServer server(kMaxMessage);
  Client listener = connectAs(server, "inbox");
  constexpr uint64_t kCount = 300;
  Status sent;
  uint64_t largeClaims = 0, inPlace = 0;
  bool overShm = false;
  std::thread sending([&] {
    Client c = connectAs(server, "outbox");
    overShm = c.usesSharedMemory();
    std::vector<std::byte> buf;
    for (uint64_t i = 0; i < kCount && sent.ok(); ++i) {
      if (i % 2 == 0) {
        buf.resize(sizeOf(i));
        fill(i, buf);
        sent = c.send("nodeA", "inbox", buf).status();
        continue;
      }
      SendClaim claim;
      sent = c.claim(claim, "nodeA", "inbox", sizeOf(i));
      if (!sent.ok()) break;
      if (claim.payload.size() != sizeOf(i))
        sent = Status(Errc::protocol_error, "claim of wrong size");
      fill(i, claim.payload);
      if (sizeOf(i) >= 16384) {
        ++largeClaims;
        inPlace += claim.inPlace ? 1 : 0;
      }
      Result<uint64_t> id = c.commit(claim);
      if (!id.ok()) sent = id.status();
      if (claim.handle != 0) sent = Status(Errc::protocol_error, "a committed claim still holds");
    }
    Completion done;
    for (uint64_t i = 0; i < kCount && sent.ok(); ++i) {
      sent = c.waitCompletion(done, 30s);
      if (sent.ok()) sent = done.status;
    }
  });
  Message m;
  for (uint64_t i = 0; i < kCount; ++i) {
    ASSERT_TRUE(listener.receive(m, 30s).ok()) << i;
    ASSERT_TRUE(intact(i, m.payload)) << "message " << i << " of " << m.payload.size() << " bytes";
  }
  sending.join();
  EXPECT_TRUE(sent.ok()) << sent.toString();
  EXPECT_EQ(listener.receive(m, 0ms).code(), Errc::timeout);
  if (overShm) {
    EXPECT_GT(inPlace, 0u) << "no large claim lay in the payload area";
  } else {
    EXPECT_EQ(inPlace, 0u) << "over the socket a claim is a private buffer";
  }
  std::printf("large claims in place: %llu of %llu\n", static_cast<unsigned long long>(inPlace),
              static_cast<unsigned long long>(largeClaims));
}

// A claim given back sends nothing and frees its bytes: many more large
// claims than the payload area holds are aborted, and each new one still
// lies in the area; only the one committed arrives, and it is confirmed.
TEST(SendClaimTest, AnAbortedClaimSendsNothingAndGivesItsBytesBack) {
  ThreadedServer server(kMaxMessage);
  Client listener = connectAs(server, "inbox");
  Client c = connectAs(server, "outbox");
  for (int i = 0; i < 64; ++i) {
    SendClaim claim;
    ASSERT_TRUE(c.claim(claim, "nodeA", "inbox", size_t{1} << 20).ok()) << i;
    EXPECT_EQ(claim.inPlace, c.usesSharedMemory()) << i;
    fill(2, claim.payload);
    ASSERT_TRUE(c.abort(claim).ok()) << i;
    EXPECT_EQ(claim.handle, 0u);
  }
  SendClaim claim;
  ASSERT_TRUE(c.claim(claim, "nodeA", "inbox", sizeOf(2)).ok());
  fill(2, claim.payload);
  Result<uint64_t> id = c.commit(claim);
  ASSERT_TRUE(id.ok()) << id.status().toString();
  ASSERT_TRUE(c.flush(5s).ok());
  Message m;
  ASSERT_TRUE(listener.receive(m, 10s).ok());
  EXPECT_TRUE(intact(2, m.payload));
  EXPECT_EQ(m.srcService, "outbox");
  Completion done;
  ASSERT_TRUE(c.waitCompletion(done, 10s).ok());
  EXPECT_EQ(done.msgId, *id);
  EXPECT_TRUE(done.status.ok()) << done.status.toString();
  EXPECT_EQ(listener.receive(m, 200ms).code(), Errc::timeout) << "an aborted claim arrived";
}

TEST(SendClaimTest, MisuseIsRefusedAndTheHeldClaimStaysUsable) {
  ThreadedServer server(kMaxMessage);
  Client listener = connectAs(server, "inbox");
  Client c = connectAs(server, "outbox");
  SendClaim other;
  EXPECT_EQ(c.claim(other, "nodeA", "inbox", size_t{kMaxMessage} + 1).code(), Errc::too_large);
  EXPECT_EQ(c.claim(other, "no/de", "inbox", 10).code(), Errc::bad_request);
  EXPECT_EQ(c.commit(other).status().code(), Errc::bad_request) << "nothing was claimed";
  SendClaim claim;
  ASSERT_TRUE(c.claim(claim, "nodeA", "inbox", 5).ok());
  EXPECT_EQ(c.claim(other, "nodeA", "inbox", 5).code(), Errc::bad_request) << "one at a time";
  EXPECT_EQ(c.abort(other).code(), Errc::bad_request);
  std::memcpy(claim.payload.data(), "hello", 5);
  SendClaim copy = claim;
  ASSERT_TRUE(c.commit(claim).ok());
  EXPECT_EQ(c.commit(copy).status().code(), Errc::bad_request) << "committed twice";
  EXPECT_EQ(c.abort(copy).code(), Errc::bad_request) << "aborted after its commit";
  ASSERT_TRUE(c.flush(5s).ok());
  Message m;
  ASSERT_TRUE(listener.receive(m, 10s).ok());
  EXPECT_EQ(m.text(), "hello");
  EXPECT_EQ(listener.receive(m, 200ms).code(), Errc::timeout);
}

// The C API's claims: the payload written where rdmamsg_claim() points,
// committed with its id, one claim at a time, abort of none an error.
TEST(SendClaimTest, TheCApiClaimsCommitsAndAborts) {
  ThreadedServer server(kMaxMessage);
  Client listener = connectAs(server, "inbox");
  rdmamsg_client* c = nullptr;
  ASSERT_EQ(rdmamsg_connect(server.socket().c_str(), "c-sender", 5000, &c), RDMAMSG_OK);
  void* at = nullptr;
  void* other = nullptr;
  EXPECT_EQ(rdmamsg_abort(c), RDMAMSG_BAD_REQUEST);
  for (uint64_t i = 0; i < 5; ++i) {
    ASSERT_EQ(rdmamsg_claim(c, "nodeA", "inbox", sizeOf(i), &at), RDMAMSG_OK) << i;
    EXPECT_EQ(rdmamsg_claim(c, "nodeA", "inbox", 10, &other), RDMAMSG_BAD_REQUEST);
    fill(i, {static_cast<std::byte*>(at), sizeOf(i)});
    uint64_t id = 0;
    ASSERT_EQ(rdmamsg_commit(c, &id), RDMAMSG_OK) << rdmamsg_last_error(c);
    EXPECT_NE(id, 0u);
    EXPECT_EQ(rdmamsg_commit(c, &id), RDMAMSG_BAD_REQUEST) << "committed twice";
  }
  ASSERT_EQ(rdmamsg_claim(c, "nodeA", "inbox", 100, &at), RDMAMSG_OK);
  ASSERT_EQ(rdmamsg_abort(c), RDMAMSG_OK);
  ASSERT_EQ(rdmamsg_flush(c, 5000), RDMAMSG_OK);
  Message m;
  for (uint64_t i = 0; i < 5; ++i) {
    ASSERT_TRUE(listener.receive(m, 10s).ok()) << i;
    EXPECT_TRUE(intact(i, m.payload)) << i;
  }
  EXPECT_EQ(listener.receive(m, 200ms).code(), Errc::timeout) << "the aborted claim arrived";
  rdmamsg_completion done{};
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(rdmamsg_wait_completion(c, &done, 5000), RDMAMSG_OK);
    EXPECT_EQ(done.code, RDMAMSG_OK) << done.message;
  }
  // The library's system calls, by call, add up (the handshake read the socket).
  rdmamsg_counters n{};
  rdmamsg_get_counters(c, &n);
  EXPECT_GT(n.socket_reads, 0u);
  EXPECT_EQ(n.syscalls,
            n.socket_reads + n.socket_writes + n.polls + n.doorbell_rings + n.doorbell_reads);
  rdmamsg_close(c);
}

}  // namespace
}  // namespace rdmamsg
