// Integration: many messages and large messages across real daemons — all
// arrive, in order per sender, once, intact, and every send is answered.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <map>
#include <set>
#include <thread>

#include "harness.h"
#include "raw_session.h"
#include "rdmamsg/client.h"
#include "tests/support/wait.h"

namespace rdmamsg::itest {
namespace {

// Payload of message `i` from `node`: "node i " then filler whose length
// varies with i (0..1500 bytes), so batches hold many messages of odd sizes.
std::string payloadFor(const std::string& node, int i) {
  std::string s = node + " " + std::to_string(i) + " ";
  size_t fill = (static_cast<size_t>(i) * 7919) % 1501;
  for (size_t k = 0; k < fill; k++)
    s.push_back(static_cast<char>('a' + (i + k) % 26));
  return s;
}

struct SendReport {
  int sent = 0;
  std::set<uint64_t> acked;
  std::vector<std::string> problems;
};

// Sends `count` messages to gamma/sink and collects a completion for each.
SendReport sendMany(const std::string& socket, const std::string& node, int count) {
  SendReport r;
  auto client = Client::connect(socket);
  if (!client) {
    r.problems.push_back("connect: " + client.status().toString());
    return r;
  }
  std::set<uint64_t> ids;
  for (int i = 0; i < count; i++) {
    std::string p = payloadFor(node, i);
    auto id = client->send("gamma", "sink", std::string_view(p));
    if (!id) {
      r.problems.push_back("send " + std::to_string(i) + ": " + id.status().toString());
      return r;
    }
    ids.insert(*id);
    r.sent++;
  }
  Completion c;
  while (r.acked.size() + r.problems.size() < ids.size()) {
    Status st = client->waitCompletion(c, 30s);
    if (!st.ok()) {
      r.problems.push_back("waitCompletion: " + st.toString());
      break;
    }
    if (!ids.count(c.msgId)) r.problems.push_back("completion for unknown id");
    if (!c.status.ok())
      r.problems.push_back("message " + std::to_string(c.msgId) + ": " + c.status.toString());
    else if (!r.acked.insert(c.msgId).second)
      r.problems.push_back("second completion for " + std::to_string(c.msgId));
  }
  return r;
}

TEST(Relay, ThousandsOfMessagesFromTwoSendersArriveInOrderOnceAndAreAllAcked) {
  constexpr int kCount = 5000;
  Cluster c({"alpha", "beta", "gamma"});
  ASSERT_TRUE(c.start());
  ASSERT_TRUE(c.waitFullMesh(10s));
  auto sink = Taker::start(c.socket("gamma"), "sink");
  ASSERT_TRUE(sink);

  SendReport fromAlpha, fromBeta;
  std::thread a([&] { fromAlpha = sendMany(c.socket("alpha"), "alpha", kCount); });
  std::thread b([&] { fromBeta = sendMany(c.socket("beta"), "beta", kCount); });

  std::map<std::string, int> next{{"alpha", 0}, {"beta", 0}};
  std::vector<std::string> problems;
  Message m;
  int received = 0;
  while (received < 2 * kCount) {
    Status st = sink->receive(m, 30s);
    if (!st.ok()) {
      problems.push_back("receive after " + std::to_string(received) + ": " + st.toString());
      break;
    }
    received++;
    auto it = next.find(m.srcNode);
    if (it == next.end()) {
      problems.push_back("message from " + m.srcNode);
      continue;
    }
    std::string want = payloadFor(m.srcNode, it->second);
    if (m.text() != want) {
      problems.push_back("from " + m.srcNode + ": expected message " + std::to_string(it->second) +
                         ", got '" + std::string(m.text().substr(0, 24)) + "...'");
      if (problems.size() > 10) break;
    }
    it->second++;
  }
  a.join();
  b.join();
  EXPECT_TRUE(problems.empty()) << ::testing::PrintToString(problems);
  EXPECT_EQ(next["alpha"], kCount);
  EXPECT_EQ(next["beta"], kCount);
  for (auto* r : {&fromAlpha, &fromBeta}) {
    EXPECT_EQ(r->sent, kCount);
    EXPECT_EQ(r->acked.size(), static_cast<size_t>(kCount));
    EXPECT_TRUE(r->problems.empty()) << ::testing::PrintToString(r->problems);
  }
  // Nothing more arrives: no duplicates.
  EXPECT_EQ(sink->receive(m, 300ms).code(), Errc::timeout) << "extra message: " << m.text();
}

std::vector<std::byte> pattern(size_t n, uint32_t seed) {
  std::vector<std::byte> v(n);
  uint32_t x = seed;
  for (auto& b : v) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<std::byte>(x >> 24);
  }
  return v;
}

TEST(Relay, LargeMessagesAreFragmentedAndArriveIntact) {
  MeshOptions o;
  o.maxMessageSize = "6MiB";
  Cluster c({"alpha", "beta"}, o);
  ASSERT_TRUE(c.start());
  ASSERT_TRUE(c.waitFullMesh(10s));
  auto listener = Client::connect(c.socket("beta"));
  ASSERT_TRUE(listener);
  ASSERT_TRUE(listener->registerService("big").ok());
  auto sender = Client::connect(c.socket("alpha"));
  ASSERT_TRUE(sender);
  ASSERT_EQ(sender->maxMessageSize(), 6u << 20);

  // 4 MiB (64 buffers' worth), then sizes around the 64 KiB buffer, then
  // exactly the maximum, pipelined.
  std::vector<size_t> sizes = {4u << 20, 65536 - 64, 65536, 65536 + 1, 3 * 65536 + 7, 6u << 20};
  for (size_t i = 0; i < sizes.size(); i++) {
    auto p = pattern(sizes[i], static_cast<uint32_t>(i));
    auto id = sender->send("beta", "big", std::span<const std::byte>(p));
    ASSERT_TRUE(id) << id.status().toString();
  }
  // The listener reads while the acks come in: the daemon hands a listener
  // only about 2 MiB at a time (bounded memory), so waiting for every ack
  // before reading would stall the delivery of the last messages.
  std::vector<Message> got;
  size_t acked = 0;
  ASSERT_TRUE(test::waitFor(
      [&] {
        Completion comp;
        while (sender->pollCompletion(comp)) {
          EXPECT_TRUE(comp.status.ok()) << comp.msgId << ": " << comp.status.toString();
          acked++;
        }
        Message m;
        while (listener->tryReceive(m))
          got.push_back(std::move(m));
        return acked == sizes.size() && got.size() == sizes.size();
      },
      30s))
      << acked << " acked, " << got.size() << " received";
  for (size_t i = 0; i < sizes.size(); i++) {
    const Message& m = got[i];
    EXPECT_EQ(m.payload.size(), sizes[i]);
    EXPECT_TRUE(m.payload == pattern(sizes[i], static_cast<uint32_t>(i)))
        << "message " << i << " of " << sizes[i] << " bytes corrupted";
  }
}

TEST(Relay, MessageOverMaxMessageSizeIsRefusedWithTooLarge) {
  MeshOptions o;
  o.maxMessageSize = "1MiB";
  Cluster c({"alpha", "beta"}, o);
  ASSERT_TRUE(c.start());
  ASSERT_TRUE(c.waitFullMesh(10s));
  auto listener = Taker::start(c.socket("beta"), "big");
  ASSERT_TRUE(listener);

  // Through librdmamsg (which checks against the daemon's WELCOME)...
  auto sender = Client::connect(c.socket("alpha"));
  ASSERT_TRUE(sender);
  auto tooBig = pattern((1u << 20) + 1, 1);
  Status st = sender->sendAndWait("beta", "big", tooBig, 10s);
  EXPECT_EQ(st.code(), Errc::too_large) << st.toString();

  // ...and by the daemon itself, for a client that does not check.
  RawSession raw(c.socket("alpha"));
  ASSERT_TRUE(raw.handshake()) << raw.error();
  ASSERT_TRUE(raw.sendMessage(7, "beta", "big", std::span<const std::byte>(tooBig)));
  auto reply = raw.nextFrame(10s);
  ASSERT_TRUE(reply) << raw.error();
  EXPECT_EQ(reply->kind, proto::FrameKind::error);
  EXPECT_EQ(reply->msgId, 7u);
  EXPECT_EQ(reply->errc, Errc::too_large) << reply->text;

  // The connection is fine afterwards: a message of exactly the maximum goes.
  auto max = pattern(1u << 20, 2);
  EXPECT_TRUE(sender->sendAndWait("beta", "big", max, 10s).ok());
  Message m;
  ASSERT_TRUE(listener->receive(m, 10s).ok());
  EXPECT_TRUE(m.payload == max);
  EXPECT_EQ(listener->receive(m, 200ms).code(), Errc::timeout) << "the oversized one arrived";
}

// The receiving daemon enforces its own max_message_size: a message it will
// not take is refused to its sender with too_large, and the connection
// keeps carrying the others.
TEST(Relay, ReceiverWithASmallerMaximumRefusesWithTooLarge) {
  MeshOptions o;
  o.maxMessageSize = "4MiB";
  o.nodeExtra["beta"] = "max_message_size: 1MiB\n";  // beta accepts at most 1 MiB
  Cluster c({"alpha", "beta"}, o);
  ASSERT_TRUE(c.start());
  ASSERT_TRUE(c.waitFullMesh(10s));
  auto beta = Client::connect(c.socket("beta"));
  ASSERT_TRUE(beta);
  ASSERT_EQ(beta->maxMessageSize(), 1u << 20);
  auto listener = Taker::start(c.socket("beta"), "big");
  ASSERT_TRUE(listener);
  auto sender = Client::connect(c.socket("alpha"));
  ASSERT_TRUE(sender);

  auto small1 = pattern(1000, 1), big = pattern(2u << 20, 2), small2 = pattern(1000, 3);
  auto id1 = sender->send("beta", "big", std::span<const std::byte>(small1));
  auto id2 = sender->send("beta", "big", std::span<const std::byte>(big));
  auto id3 = sender->send("beta", "big", std::span<const std::byte>(small2));
  ASSERT_TRUE(id1 && id2 && id3);
  std::map<uint64_t, Status> done;
  Completion comp;
  while (done.size() < 3) {
    ASSERT_TRUE(sender->waitCompletion(comp, 10s).ok());
    done[comp.msgId] = comp.status;
  }
  EXPECT_TRUE(done[*id1].ok()) << done[*id1].toString();
  EXPECT_EQ(done[*id2].code(), Errc::too_large) << done[*id2].toString();
  EXPECT_TRUE(done[*id3].ok()) << done[*id3].toString();
  ASSERT_TRUE(waitForStatus(c.socket("alpha"), allPeersEstablished, 10s));
  auto s = statusOf(c.socket("alpha"));
  ASSERT_TRUE(s);
  EXPECT_EQ(peerEntry(*s, "beta")->value("connects", 0), 1)
      << "the connection was dropped over one oversized message";
}

}  // namespace
}  // namespace rdmamsg::itest

namespace rdmamsg::itest {
namespace {

size_t rssKiB(pid_t pid) {
  std::string s = readFile("/proc/" + std::to_string(pid) + "/status");
  auto at = s.find("VmRSS:");
  return at == std::string::npos ? 0 : std::stoul(s.substr(at + 6));
}

// A listener that does not read: the daemons hold a bounded amount and the
// sender is slowed down (its writes block), then everything arrives once the
// listener reads.
TEST(Relay, SlowListenerPushesBackOnTheSenderWithBoundedMemory) {
  constexpr int kCount = 2000;
  constexpr size_t kSize = 64 * 1024;  // 125 MiB in all
  Cluster c({"alpha", "beta"});
  ASSERT_TRUE(c.start());
  ASSERT_TRUE(c.waitFullMesh(10s));
  auto listener = Client::connect(c.socket("beta"));
  ASSERT_TRUE(listener);
  ASSERT_TRUE(listener->registerService("slow").ok());
  const size_t rssBefore = rssKiB(c["alpha"].pid()) + rssKiB(c["beta"].pid());

  std::atomic<int> queued{0};
  std::atomic<int> acked{0};
  std::string failure;
  std::thread sender([&] {
    auto s = Client::connect(c.socket("alpha"));
    if (!s) return void(failure = s.status().toString());
    std::vector<std::byte> p(kSize, std::byte{0x5a});
    for (int i = 0; i < kCount; i++) {
      std::memcpy(p.data(), &i, sizeof i);
      auto id = s->send("beta", "slow", std::span<const std::byte>(p));
      if (!id) return void(failure = id.status().toString());
      queued++;
    }
    Completion comp;
    while (acked < kCount) {
      Status st = s->waitCompletion(comp, 30s);
      if (!st.ok() || !comp.status.ok())
        return void(failure = st.ok() ? comp.status.toString() : st.toString());
      acked++;
    }
  });
  // The sender stalls well before it has queued everything...
  int last = -1;
  auto stable = std::chrono::steady_clock::now();
  test::waitFor(
      [&] {
        int now = queued.load();
        if (now != last) {
          last = now;
          stable = std::chrono::steady_clock::now();
        }
        return std::chrono::steady_clock::now() - stable > 700ms || now == kCount;
      },
      20s);
  EXPECT_LT(queued.load(), kCount) << "nothing held the sender back";
  std::cerr << "sender stalled after " << queued.load() << " messages\n";
  const size_t rssStalled = rssKiB(c["alpha"].pid()) + rssKiB(c["beta"].pid());
  std::cerr << "daemons: " << rssBefore / 1024 << " MiB before, " << rssStalled / 1024
            << " MiB stalled\n";
#if !defined(__SANITIZE_ADDRESS__)
  // ...and the daemons hold a bounded amount (queues of a few tens of MiB),
  // not the 125 MiB the sender tried to push.
  EXPECT_LT(rssStalled - std::min(rssStalled, rssBefore), 100u * 1024)
      << "daemons grew by " << (rssStalled - rssBefore) / 1024 << " MiB";
#endif
  // Now the listener reads: everything arrives, in order.
  Message m;
  int got = 0;
  bool inOrder = true;
  while (got < kCount) {
    Status st = listener->receive(m, 20s);
    if (!st.ok()) break;
    int idx = -1;
    if (m.payload.size() == kSize) std::memcpy(&idx, m.payload.data(), sizeof idx);
    inOrder = inOrder && idx == got;
    got++;
  }
  sender.join();
  EXPECT_EQ(got, kCount);
  EXPECT_TRUE(inOrder);
  EXPECT_EQ(acked.load(), kCount);
  EXPECT_TRUE(failure.empty()) << failure;
}

}  // namespace
}  // namespace rdmamsg::itest
