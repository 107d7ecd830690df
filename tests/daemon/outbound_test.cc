// Unit tests of the sending side of a peer (daemon/peer/outbound.h), over a
// SendRoom of plain memory: batches of a fixed size, as many as the test
// allows, read back with the BatchReader the receiving daemon uses. What is
// asserted is what outbound.h promises: per-flow order and sequence numbers,
// fragmentation of a message larger than a batch, one message finished
// before the next starts, windows and backpressure that hold only their own
// flow, and exactly one outcome for every accepted message.
#include "daemon/peer/outbound.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <chrono>
#include <cstddef>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/loop/counters.h"
#include "tests/support/wait.h"

namespace rdmamsg::peer {
namespace {

using namespace std::chrono_literals;

// Batches of `batchBytes`, at most `batchesLeft` of them (opened on demand,
// as a connection opens one on a send buffer and a credit).
class MemoryRoom final : public SendRoom {
 public:
  struct Message {
    uint64_t seq;
    uint8_t flags;
    std::string src, dst;
    uint64_t totalLength;
    std::string payload;
    size_t batch;  // which sealed batch it was in
  };

  explicit MemoryRoom(size_t batchBytes, size_t batches = std::numeric_limits<size_t>::max())
      : batchesLeft(batches), batchBytes_(batchBytes) {}

  size_t messageRoom() override {
    if (!open_) {
      if (batchesLeft == 0) return 0;
      batchesLeft--;
      buffer_.assign(batchBytes_, std::byte{0});
      writer_.reset(buffer_.data(), buffer_.size());
      open_ = true;
    }
    return writer_.room();
  }
  BatchWriter& batch() override { return writer_; }
  void sealBatch() override {
    if (!open_) return;
    const size_t bytes = writer_.finish(1) - writer_.external();
    sealed_.emplace_back(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(bytes));
    open_ = false;
  }
  // In place: the batch is the head from the buffer, then the payload's
  // bytes as they are when the send completes (complete()), gathered as
  // the NIC would; the payload is held until then.
  bool canPostInPlace(ExternalArea&) override { return postsInPlace; }
  void sealInPlace(const PayloadHandle& payload, std::span<const std::byte> bytes) override {
    EXPECT_EQ(writer_.external(), bytes.size());
    sealBatch();
    pendingInPlace_.push_back({sealed_.size() - 1, payload.share(), bytes});
  }
  // Every send posted from a payload completes: its bytes are read now.
  void complete() {
    for (const auto& p : pendingInPlace_)
      sealed_[p.batch].insert(sealed_[p.batch].end(), p.bytes.begin(), p.bytes.end());
    pendingInPlace_.clear();  // the sends' holds end
  }
  size_t pendingInPlace() const { return pendingInPlace_.size(); }

  // Every message record of the sealed batches (the open one is sealed first).
  std::vector<Message> messages() {
    sealBatch();
    complete();
    std::vector<Message> out;
    for (size_t b = 0; b < sealed_.size(); b++) {
      BatchReader reader(sealed_[b]);
      EXPECT_TRUE(reader.open());
      Record r;
      while (reader.next(r)) {
        if (r.type != RecordType::kMessage) continue;
        out.push_back(
            {r.seq, r.flags, std::string(r.srcService), std::string(r.dstService), r.totalLength,
             std::string(reinterpret_cast<const char*>(r.payload.data()), r.payload.size()), b});
      }
    }
    return out;
  }
  // The payload sent so far, its fragments joined: of message `seq`, or of
  // every message in order.
  std::string joinedPayload(std::optional<uint64_t> seq = std::nullopt) {
    std::string joined;
    for (const auto& msg : messages())
      if (!seq || msg.seq == *seq) joined += msg.payload;
    return joined;
  }
  size_t sealedBatches() const { return sealed_.size(); }

  size_t batchesLeft;
  bool postsInPlace = true;

 private:
  struct InPlace {
    size_t batch;
    PayloadHandle payload;
    std::span<const std::byte> bytes;
  };
  std::vector<InPlace> pendingInPlace_;
  size_t batchBytes_;
  std::vector<std::byte> buffer_;
  BatchWriter writer_;
  bool open_ = false;
  std::vector<std::vector<std::byte>> sealed_;
};

// What the router would hear.
class Recorder : public PeerEvents {
 public:
  std::map<uint64_t, Status> outcomes;  // by msgId: failures and confirmed errors
  std::vector<uint64_t> deliveredIds;   // msgIds, in the order reported
  std::vector<FlowKey> drained;

  Delivery deliverIncoming(Peer&, uint64_t, uint64_t, std::string_view, std::string_view,
                           std::span<const std::byte>, DeliveryRoom*) override {
    return Delivery::kDelivered;
  }
  void connectionLost(Peer&) override {}
  void outcome(uint64_t, uint64_t msgId, const Status& status) override {
    EXPECT_TRUE(outcomes.emplace(msgId, status).second) << "two outcomes for message " << msgId;
  }
  void delivered(uint64_t, uint64_t msgId, uint64_t count) override {
    for (uint64_t i = 0; i < count; i++)
      deliveredIds.push_back(msgId + i);
  }
  void queueDrained(const FlowKey& key) override { drained.push_back(key); }
};

std::span<const std::byte> bytes(const std::string& s) {
  return std::as_bytes(std::span(s));
}

// A payload in a client's memory: how many hold it (its handles alive).
// The client reuses its memory the moment the last handle lets go: the
// hold's end overwrites it, so a byte read after that is a wrong byte.
class HeldString {
 public:
  explicit HeldString(std::string& s, ExternalArea::Order order = ExternalArea::Order::inOrder)
      : memory_(s), area_(bytes(s), order) {}
  // The local side's handle, which it hands over with the message.
  PayloadHandle handle() {
    auto hold = std::make_shared<Hold>(memory_, area_);
    hold_ = hold;
    return PayloadHandle(hold);
  }
  long holds() const { return hold_.use_count(); }
  ExternalArea& area() { return area_; }

 private:
  struct Hold final : PayloadHold {
    Hold(std::string& memory, ExternalArea& a) : memory_(memory), a_(a) {}
    ~Hold() override { memory_.assign(memory_.size(), 'X'); }
    ExternalArea& area() override { return a_; }
    std::string& memory_;
    ExternalArea& a_;
  };
  std::string& memory_;
  ExternalArea area_;
  std::weak_ptr<Hold> hold_;
};

std::string alphabet(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; i++)
    s[i] = static_cast<char>('a' + i % 26);
  return s;
}

class OutboundTest : public ::testing::Test {
 protected:
  OutboundTest() {
    config_.buffers.sendQueueLimit = 64 * 1024;
    config_.timers.messageTimeout = 10s;
  }
  void SetUp() override { reset(); }
  void reset(uint64_t window = 1 << 20, uint64_t maxMessage = 1 << 20) {
    out_ = std::make_unique<Outbound>(config_, peerName_, kPeerId, events_, [this] { wakes_++; });
    out_->reset(window, maxMessage);
  }
  // Sends message `msgId` of session 1 from service "src" to `dst`.
  Status send(SendRoom* room, uint64_t msgId, const std::string& dst, const std::string& payload,
              std::optional<FlowKey>* holdOn = nullptr, PayloadHandle inPlace = {}) {
    // The local side holds the payload while send() runs, then lets go.
    Result<Admitted> admitted =
        out_->send(room, 1, msgId, "src", dst, bytes(payload), inPlace ? &inPlace : nullptr);
    if (!admitted) return admitted.status();
    if (holdOn != nullptr) *holdOn = admitted->holdOn;
    return Status();
  }

  // Sends message `msgId` whose payload is the first `size` bytes of a
  // client's `area`, held in place.
  Status sendInPlace(SendRoom* room, uint64_t msgId, std::string& area, size_t size,
                     HeldString& held) {
    const PayloadHandle local = held.handle();
    return out_->send(room, 1, msgId, "src", "svc", bytes(area).first(size), &local).status();
  }

  static constexpr uint64_t kPeerId = 7;
  config::Config config_;
  std::string peerName_ = "beta";
  Recorder events_;
  int wakes_ = 0;  // the peer marked for its service step
  std::unique_ptr<Outbound> out_;
};

TEST_F(OutboundTest, MessagesOfAFlowGoWholeInOrderWithSequenceNumbers) {
  MemoryRoom room(16 * 1024);
  for (uint64_t id = 1; id <= 3; id++)
    ASSERT_TRUE(send(&room, id, "svc", "message " + std::to_string(id)).ok());
  EXPECT_EQ(out_->queuedBytes(), 0u) << "written straight into the batch";
  EXPECT_EQ(out_->inFlight(), 3u);
  auto m = room.messages();
  ASSERT_EQ(m.size(), 3u);
  for (size_t i = 0; i < 3; i++) {
    EXPECT_EQ(m[i].seq, i + 1);
    EXPECT_EQ(m[i].flags, kFirstFragment | kLastFragment);
    EXPECT_EQ(m[i].src, "src");
    EXPECT_EQ(m[i].dst, "svc");
    EXPECT_EQ(m[i].payload, "message " + std::to_string(i + 1));
  }
}

TEST_F(OutboundTest, WithoutARoomMessagesQueuePerFlowAndPumpSendsThemInOrder) {
  for (uint64_t id = 1; id <= 4; id++)
    ASSERT_TRUE(send(nullptr, id, id % 2 ? "a" : "b", "m" + std::to_string(id)).ok());
  EXPECT_GT(out_->queuedBytes(), 0u);
  EXPECT_EQ(out_->inFlight(), 0u) << "no sequence number before the wire";
  auto stats = out_->flowStats();
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_EQ(stats[0].service, "a");
  EXPECT_EQ(stats[0].queuedMessages, 2u);
  EXPECT_EQ(stats[1].service, "b");
  EXPECT_EQ(stats[1].queuedMessages, 2u);

  MemoryRoom room(16 * 1024);
  out_->pump(room);
  EXPECT_EQ(out_->queuedBytes(), 0u);
  auto m = room.messages();
  ASSERT_EQ(m.size(), 4u);
  std::map<std::string, std::vector<std::string>> perFlow;
  for (size_t i = 0; i < m.size(); i++) {
    EXPECT_EQ(m[i].seq, i + 1) << "sequence numbers are given on the wire";
    perFlow[m[i].dst].push_back(m[i].payload);
  }
  EXPECT_EQ(perFlow["a"], (std::vector<std::string>{"m1", "m3"}));
  EXPECT_EQ(perFlow["b"], (std::vector<std::string>{"m2", "m4"}));
}

// A flow with more queued than one turn's bytes: pump() writes a turn and
// says that another is due while the link has room — the peer runs it at
// once rather than leave the window unused until something else wakes it
// (a held sender sends nothing, confirmations come lazily). With the link
// full it says nothing: a completion wakes the peer.
TEST_F(OutboundTest, PumpSaysWhenATurnEndedWithMoreToWrite) {
  reset(64 << 20);
  const std::string payload(8192, 'p');
  constexpr uint64_t kCount = 100;  // 800 KiB: more than a turn
  for (uint64_t id = 1; id <= kCount; id++)
    ASSERT_TRUE(send(nullptr, id, "svc", payload).ok());
  MemoryRoom room(256 * 1024);
  int turns = 0;
  while (out_->pump(room)) {
    ASSERT_LT(++turns, 100) << "every turn writes";
    EXPECT_GT(out_->queuedBytes(), 0u);
  }
  EXPECT_GE(turns, 2) << "800 KiB take more than one turn";
  EXPECT_EQ(out_->queuedBytes(), 0u);
  const auto m = room.messages();
  EXPECT_EQ(std::count_if(m.begin(), m.end(),
                          [](const auto& r) { return (r.flags & kLastFragment) != 0; }),
            kCount);

  MemoryRoom full(256 * 1024, 1);  // room for one batch only
  for (uint64_t id = kCount + 1; id <= 2 * kCount; id++)
    ASSERT_TRUE(send(nullptr, id, "svc", payload).ok());
  EXPECT_FALSE(out_->pump(full)) << "the link is full: a completion wakes the peer";
  EXPECT_GT(out_->queuedBytes(), 0u);
}

TEST_F(OutboundTest, AMessageLargerThanABatchIsFragmentedAcrossBatches) {
  MemoryRoom room(8 * 1024);
  std::string big(30000, '\0');
  for (size_t i = 0; i < big.size(); i++)
    big[i] = static_cast<char>('a' + i % 26);
  ASSERT_TRUE(send(&room, 1, "svc", big).ok());
  auto m = room.messages();
  ASSERT_GE(m.size(), 4u) << "30000 bytes in batches of 8 KiB";
  std::string joined;
  for (size_t i = 0; i < m.size(); i++) {
    EXPECT_EQ(m[i].seq, 1u) << "every fragment carries the message's seq";
    EXPECT_EQ(m[i].batch, i) << "one fragment per batch";
    EXPECT_EQ((m[i].flags & kFirstFragment) != 0, i == 0);
    EXPECT_EQ((m[i].flags & kLastFragment) != 0, i + 1 == m.size());
    joined += m[i].payload;
  }
  EXPECT_EQ(m[0].totalLength, big.size()) << "the first fragment carries the total length";
  EXPECT_EQ(joined, big);
}

TEST_F(OutboundTest, AStartedMessageIsFinishedBeforeAnotherStarts) {
  MemoryRoom room(8 * 1024, 2);  // the link takes two batches now
  std::string big(30000, 'x');
  ASSERT_TRUE(send(&room, 1, "a", big).ok());
  EXPECT_FALSE(out_->settled()) << "its first fragments are on the wire";
  room.batchesLeft = 100;  // the link has room again
  ASSERT_TRUE(send(&room, 2, "b", "small").ok());
  EXPECT_GT(out_->queuedBytes(), 0u) << "queued behind the started message";
  out_->pump(room);
  auto m = room.messages();
  ASSERT_GE(m.size(), 2u);
  EXPECT_EQ(m.back().seq, 2u);
  EXPECT_EQ(m.back().payload, "small");
  std::string first;
  for (size_t i = 0; i + 1 < m.size(); i++) {
    EXPECT_EQ(m[i].seq, 1u) << "no record of another message inside message 1";
    first += m[i].payload;
  }
  EXPECT_EQ(first, big);
}

TEST_F(OutboundTest, AFullWindowHoldsOnlyItsOwnFlow) {
  const uint64_t cost = windowCost(3, 4, 1000);
  reset(2 * cost);  // two messages of 1000 bytes per flow unconfirmed
  MemoryRoom room(64 * 1024);
  const std::string payload(1000, 'p');
  for (uint64_t id = 1; id <= 4; id++)
    ASSERT_TRUE(send(&room, id, "slow", payload).ok());
  for (uint64_t id = 11; id <= 14; id++)
    ASSERT_TRUE(send(&room, id, "fast", payload).ok());
  out_->pump(room);
  auto count = [&](const std::string& dst) {
    size_t n = 0;
    for (const auto& m : room.messages())
      n += m.dst == dst ? 1 : 0;
    return n;
  };
  EXPECT_EQ(count("slow"), 2u) << "its window holds two";
  EXPECT_EQ(count("fast"), 2u) << "its own window, not the slow flow's";

  // The peer confirms the fast flow's two (seq 3 and 4): only it moves on.
  ASSERT_TRUE(out_->settle(3, 4, Errc::ok));
  out_->pump(room);
  EXPECT_EQ(count("fast"), 4u);
  EXPECT_EQ(count("slow"), 2u);
  EXPECT_EQ(events_.deliveredIds, (std::vector<uint64_t>{11, 12}));

  ASSERT_TRUE(out_->settle(1, 1, Errc::ok));
  out_->pump(room);
  EXPECT_EQ(count("slow"), 3u) << "a confirmation reopens the window";
}

TEST_F(OutboundTest, AMessageCostingMoreThanTheWindowStillGoesAlone) {
  reset(100);
  MemoryRoom room(64 * 1024);
  ASSERT_TRUE(send(&room, 1, "svc", std::string(5000, 'x')).ok());
  ASSERT_TRUE(send(&room, 2, "svc", "next").ok());
  auto m = room.messages();
  ASSERT_EQ(m.size(), 1u) << "a flow with nothing unconfirmed may start any message";
  ASSERT_TRUE(out_->settle(1, 1, Errc::ok));
  out_->pump(room);
  EXPECT_EQ(room.messages().size(), 2u);
}

TEST_F(OutboundTest, OverTheMaxMessageSizeIsRefusedAsTooLarge) {
  reset(1 << 20, 100);
  MemoryRoom room(64 * 1024);
  Status st = send(&room, 1, "svc", std::string(101, 'x'));
  EXPECT_EQ(st.code(), Errc::too_large);
  EXPECT_NE(st.message().find("beta"), std::string::npos) << st.message();
  EXPECT_TRUE(send(&room, 2, "svc", std::string(100, 'x')).ok());
  EXPECT_EQ(room.messages().size(), 1u);
}

TEST_F(OutboundTest, AFullQueueHoldsOnlyItsFlowsSendersUntilItDrainsToHalf) {
  config_.buffers.sendQueueLimit = 4000;
  reset();
  const std::string payload(1000, 'q');
  std::optional<FlowKey> key;
  uint64_t id = 1;
  while (!key && id < 100)
    ASSERT_TRUE(send(nullptr, id++, "full", payload, &key).ok());
  ASSERT_TRUE(key.has_value()) << "a flow over send_queue_limit holds its senders";
  EXPECT_EQ(key->peer, kPeerId);
  std::optional<FlowKey> other = FlowKey{};
  ASSERT_TRUE(send(nullptr, 1000, "other", payload, &other).ok());
  EXPECT_FALSE(other.has_value()) << "another flow is not held";
  EXPECT_TRUE(events_.drained.empty());

  MemoryRoom room(64 * 1024);
  out_->pump(room);
  EXPECT_EQ(events_.drained, (std::vector<FlowKey>{*key}));
}

// A burst makes a flow's queue grow; once it is drained the memory goes back
// at the next tick, so that flows once used (kept while idle, up to 64) do
// not each hold the size of their largest burst — and a flow drained and
// filled again within a tick (a stream of large messages) reuses it.
TEST_F(OutboundTest, ADrainedFlowGivesBackItsQueuesMemory) {
  config_.buffers.sendQueueLimit = 8u << 20;
  reset(64u << 20);  // a window the whole burst fits in
  const std::string payload(64 * 1024, 'b');
  for (uint64_t id = 1; id <= 32; id++)
    ASSERT_TRUE(send(nullptr, id, "burst", payload).ok());
  EXPECT_GE(out_->bufferBytes(), 2u << 20) << "2 MiB queued";
  MemoryRoom room(4u << 20);
  for (int turn = 0; turn < 100 && out_->queuedBytes() > 0; turn++)
    out_->pump(room);  // a flow writes 256 KiB a turn
  ASSERT_EQ(out_->queuedBytes(), 0u);
  const size_t grown = out_->bufferBytes();
  EXPECT_GE(grown, 2u << 20) << "kept until the tick";
  for (uint64_t id = 33; id <= 40; id++)
    ASSERT_TRUE(send(nullptr, id, "burst", payload).ok());
  EXPECT_EQ(out_->bufferBytes(), grown) << "refilled in the same storage";
  for (int turn = 0; turn < 100 && out_->queuedBytes() > 0; turn++)
    out_->pump(room);
  ASSERT_EQ(out_->queuedBytes(), 0u);
  out_->expire();  // the tick
  EXPECT_LE(out_->bufferBytes(), 64u * 1024);
}

TEST_F(OutboundTest, ConfirmationsGiveEachMessageOneOutcome) {
  MemoryRoom room(64 * 1024);
  for (uint64_t id = 1; id <= 4; id++)
    ASSERT_TRUE(send(&room, id, "svc", "m").ok());
  ASSERT_TRUE(out_->settle(1, 1, Errc::ok));
  ASSERT_TRUE(out_->settle(3, 3, Errc::unknown_service));  // before 2: out of order
  EXPECT_FALSE(out_->settle(3, 3, Errc::ok)) << "confirmed twice";
  EXPECT_FALSE(out_->settle(9, 9, Errc::ok)) << "never sent";
  const Status twice = out_->settle(3, 3, Errc::ok);
  EXPECT_EQ(twice.code(), Errc::protocol_error);
  EXPECT_EQ(twice.message(),
            "confirmation for a message not in flight (message 3 confirmed twice)");
  EXPECT_EQ(
      out_->settle(9, 9, Errc::ok).message().rfind("confirmation for a message not in flight", 0),
      0u)
      << "the words the connection closes with";
  ASSERT_TRUE(out_->settle(2, 2, Errc::ok));
  EXPECT_EQ(events_.deliveredIds, (std::vector<uint64_t>{1, 2}));
  ASSERT_EQ(events_.outcomes.count(3), 1u);
  EXPECT_EQ(events_.outcomes.at(3).code(), Errc::unknown_service);
  EXPECT_NE(events_.outcomes.at(3).message().find("svc"), std::string::npos);
  EXPECT_EQ(out_->inFlight(), 1u);
  EXPECT_EQ(out_->confirmed(), 3u);
  ASSERT_TRUE(out_->settle(4, 4, Errc::ok));
  EXPECT_TRUE(out_->settled());
}

TEST_F(OutboundTest, ALostConnectionFailsEveryMessageOnceQueuedOrInFlight) {
  MemoryRoom room(8 * 1024, 3);
  ASSERT_TRUE(send(&room, 1, "a", "whole").ok());
  ASSERT_TRUE(out_->settle(1, 1, Errc::ok));
  ASSERT_TRUE(send(&room, 2, "a", "unconfirmed").ok());
  ASSERT_TRUE(send(&room, 3, "a", std::string(30000, 'x')).ok());  // started, not finished
  ASSERT_TRUE(send(&room, 4, "b", "queued").ok());
  ASSERT_TRUE(send(nullptr, 5, "c", "queued without a room").ok());
  out_->failAll(Status(Errc::peer_unreachable, "connection to beta lost"));
  EXPECT_EQ(events_.deliveredIds, (std::vector<uint64_t>{1}));
  ASSERT_EQ(events_.outcomes.size(), 4u);
  for (uint64_t id = 2; id <= 5; id++)
    EXPECT_EQ(events_.outcomes.at(id).code(), Errc::peer_unreachable) << id;
  EXPECT_EQ(out_->failed(), 4u);
  EXPECT_EQ(out_->queuedBytes(), 0u);
  EXPECT_TRUE(out_->settled());
}

TEST_F(OutboundTest, AStuckFlowTimesOutItsOwnMessagesOnly) {
  config_.timers.messageTimeout = 1ms;
  const uint64_t cost = windowCost(3, 5, 10);
  reset(cost);  // one message per flow unconfirmed
  MemoryRoom room(64 * 1024);
  ASSERT_TRUE(send(&room, 1, "stuck", std::string(10, 's')).ok());
  ASSERT_TRUE(send(&room, 2, "stuck", std::string(10, 's')).ok());  // held by the window
  ASSERT_TRUE(send(&room, 3, "going", std::string(10, 'g')).ok());
  ASSERT_TRUE(out_->settle(2, 2, Errc::ok));  // "going" was seq 2: its listener took it
  // Past the deadline (the coarse clock moves in steps of a few ms).
  ASSERT_TRUE(test::waitFor(
      [&] {
        out_->expire();
        return events_.outcomes.size() == 2;
      },
      2s));
  EXPECT_EQ(events_.outcomes.at(1).code(), Errc::timeout);
  EXPECT_EQ(events_.outcomes.at(2).code(), Errc::timeout);
  EXPECT_EQ(events_.outcomes.count(3), 0u);
  EXPECT_EQ(events_.deliveredIds, (std::vector<uint64_t>{3}));
}

TEST_F(OutboundTest, ALargePayloadInPlaceIsPostedFromWhereItLiesNotCopied) {
  MemoryRoom room(32 * 1024);
  std::string big = alphabet(200 * 1024);
  const std::string sent = big;
  HeldString held(big);
  const uint64_t copiedBefore = loop::copies().sendBuffers;
  const uint64_t inPlaceBefore = loop::copies().sentInPlace;
  ASSERT_TRUE(send(&room, 1, "svc", big, nullptr, held.handle()).ok());
  EXPECT_GE(room.pendingInPlace(), 7u) << "200 KiB in batches of 32 KiB, each posted in place";
  EXPECT_EQ(held.holds(), static_cast<long>(room.pendingInPlace()));
  EXPECT_EQ(loop::copies().sendBuffers, copiedBefore) << "no payload byte copied";
  EXPECT_EQ(loop::copies().sentInPlace - inPlaceBefore, big.size());
  auto m = room.messages();  // the sends complete
  EXPECT_EQ(held.holds(), 0) << "every completion gives the payload back";
  std::string joined;
  for (size_t i = 0; i < m.size(); i++) {
    EXPECT_EQ((m[i].flags & kFirstFragment) != 0, i == 0);
    EXPECT_EQ((m[i].flags & kLastFragment) != 0, i + 1 == m.size());
    if (i == 0) {
      EXPECT_EQ(m[i].totalLength, big.size());
    }
    joined += m[i].payload;
  }
  EXPECT_EQ(joined, sent) << "the receiver reassembles the message";
}

TEST_F(OutboundTest, APayloadInPlaceFollowsSmallMessagesInTheirBatch) {
  MemoryRoom room(64 * 1024);
  ASSERT_TRUE(send(&room, 1, "svc", "small").ok());
  std::string big = alphabet(20 * 1024);
  const std::string sent = big;
  HeldString held(big);
  ASSERT_TRUE(send(&room, 2, "svc", big, nullptr, held.handle()).ok());
  ASSERT_TRUE(send(&room, 3, "svc", "after").ok());
  auto m = room.messages();
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0].batch, m[1].batch) << "the small message and the large one share a batch";
  EXPECT_EQ(m[1].payload, sent);
  EXPECT_EQ(m[2].batch, m[1].batch + 1) << "a payload in place ends its batch";
  EXPECT_EQ(m[2].payload, "after");
  EXPECT_EQ(held.holds(), 0);
}

TEST_F(OutboundTest, AStartedPayloadInPlaceWaitsForTheLinkWhereItLies) {
  MemoryRoom room(32 * 1024, 2);
  std::string big = alphabet(200 * 1024);
  const std::string sent = big;
  HeldString held(big);
  const uint64_t queuedBefore = loop::copies().flowQueue;
  ASSERT_TRUE(send(&room, 1, "svc", big, nullptr, held.handle()).ok());
  room.complete();
  EXPECT_EQ(held.holds(), 1) << "the rest waits in the client's memory, held by the queue";
  EXPECT_EQ(loop::copies().flowQueue, queuedBefore) << "nothing copied into the queue";
  room.batchesLeft = 100;
  out_->pump(room);
  EXPECT_EQ(room.joinedPayload(), sent);
  EXPECT_EQ(held.holds(), 0) << "sent: the client's memory is free again";
}

TEST_F(OutboundTest, AWaitingPayloadThatWouldHoldOverHalfItsAreaIsCopiedAndFreedAtOnce) {
  reset(100 * 1024);
  MemoryRoom room(32 * 1024);
  ASSERT_TRUE(send(&room, 1, "svc", alphabet(100 * 1024)).ok());
  std::string big = alphabet(200 * 1024);
  const std::string sent = big;
  HeldString held(big);
  ASSERT_TRUE(send(&room, 2, "svc", big, nullptr, held.handle()).ok());
  EXPECT_EQ(held.holds(), 0) << "waiting for the window, it would hold all of its area: copied";
  big.assign(big.size(), 'X');  // the client reuses its memory
  ASSERT_TRUE(out_->settle(1, 1, Errc::ok));
  out_->pump(room);
  EXPECT_EQ(room.joinedPayload(2), sent);
}

TEST_F(OutboundTest, APayloadWaitingForTheLinkWaitsInPlaceUntilSpilled) {
  MemoryRoom room(32 * 1024, 0);    // no batch to write into now
  std::string area(1 << 20, '\0');  // the client's ring
  const std::string sent = alphabet(50 * 1024);
  std::copy(sent.begin(), sent.end(), area.begin());
  HeldString held(area);
  ASSERT_TRUE(sendInPlace(&room, 1, area, sent.size(), held).ok());
  EXPECT_EQ(held.holds(), 1) << "waiting for the link where it lies";
  const uint64_t queuedBefore = loop::copies().flowQueue;
  held.area().requestSpill();  // the client's ring wants its room back
  EXPECT_EQ(wakes_, 1) << "the request marks the peer for its service step";
  EXPECT_EQ(held.holds(), 1) << "and spills nothing inside the local side's call";
  out_->serveSpills();  // the peer's service step
  EXPECT_EQ(held.holds(), 0);
  EXPECT_EQ(loop::copies().flowQueue - queuedBefore, sent.size());
  std::fill(area.begin(), area.end(), 'X');  // the client reuses it
  room.batchesLeft = 100;
  out_->pump(room);
  EXPECT_EQ(room.joinedPayload(), sent);
}

TEST_F(OutboundTest, APayloadWaitingForItsWindowIsCopiedAndFreedAtOnce) {
  reset(100 * 1024);
  MemoryRoom room(32 * 1024);
  ASSERT_TRUE(send(&room, 1, "svc", alphabet(100 * 1024)).ok());  // it takes the window
  std::string area(1 << 20, '\0');
  const std::string sent = alphabet(50 * 1024);
  std::copy(sent.begin(), sent.end(), area.begin());
  HeldString held(area);
  ASSERT_TRUE(sendInPlace(&room, 2, area, sent.size(), held).ok());
  EXPECT_EQ(held.holds(), 0) << "a listener that never reads must not keep the client's ring";
  std::fill(area.begin(), area.end(), 'X');
  ASSERT_TRUE(out_->settle(1, 1, Errc::ok));
  out_->pump(room);
  EXPECT_EQ(room.joinedPayload(2), sent);
}

TEST_F(OutboundTest, ABlockOfAPayloadAreaWaitsForItsWindowWhereItLies) {
  reset(100 * 1024);
  MemoryRoom room(32 * 1024);
  ASSERT_TRUE(send(&room, 1, "svc", alphabet(100 * 1024)).ok());  // it takes the window
  std::string area(1 << 20, '\0');
  const std::string sent = alphabet(50 * 1024);
  std::copy(sent.begin(), sent.end(), area.begin());
  HeldString held(area, ExternalArea::Order::anyOrder);
  const uint64_t queuedBefore = loop::copies().flowQueue;
  ASSERT_TRUE(sendInPlace(&room, 2, area, sent.size(), held).ok());
  EXPECT_EQ(held.holds(), 1) << "a block pins only itself: it waits for the window in place";
  EXPECT_EQ(loop::copies().flowQueue, queuedBefore) << "nothing copied into the queue";
  ASSERT_TRUE(out_->settle(1, 1, Errc::ok));
  room.batchesLeft = 100;
  out_->pump(room);
  room.complete();
  EXPECT_EQ(room.joinedPayload(2), sent);
  EXPECT_EQ(held.holds(), 0) << "sent: the block is the client's again";
}

TEST_F(OutboundTest, PayloadsStillWaitingInPlaceGoBackWhenThePeerGoes) {
  MemoryRoom room(32 * 1024, 0);
  std::string area(1 << 20, 'a');
  HeldString held(area);
  ASSERT_TRUE(sendInPlace(&room, 1, area, 50 * 1024, held).ok());
  ASSERT_EQ(held.holds(), 1);
  out_.reset();
  EXPECT_EQ(held.holds(), 0);
}

TEST_F(OutboundTest, ALinkThatCannotPostInPlaceCopies) {
  MemoryRoom room(32 * 1024);
  room.postsInPlace = false;
  std::string big = alphabet(100 * 1024);
  const std::string sent = big;
  HeldString held(big);
  const uint64_t copiedBefore = loop::copies().sendBuffers;
  ASSERT_TRUE(send(&room, 1, "svc", big, nullptr, held.handle()).ok());
  EXPECT_EQ(room.pendingInPlace(), 0u);
  EXPECT_EQ(loop::copies().sendBuffers - copiedBefore, sent.size());
  EXPECT_EQ(room.joinedPayload(), sent);
}

// Authenticated batches: a payload that must wait for the link waits where
// it lies and is copied once, into the batches, when it goes — not first
// into the flow's queue.
TEST_F(OutboundTest, ALinkThatCannotPostInPlaceCopiesAWaitingPayloadOnceWhenItGoes) {
  MemoryRoom room(32 * 1024, 2);
  room.postsInPlace = false;
  std::string big = alphabet(200 * 1024);
  const std::string sent = big;
  HeldString held(big, ExternalArea::Order::anyOrder);
  const uint64_t queuedBefore = loop::copies().flowQueue;
  const uint64_t copiedBefore = loop::copies().sendBuffers;
  ASSERT_TRUE(send(&room, 1, "svc", big, nullptr, held.handle()).ok());
  EXPECT_EQ(held.holds(), 1) << "the rest waits in the client's memory";
  room.complete();
  room.batchesLeft = 100;
  out_->pump(room);
  EXPECT_EQ(room.pendingInPlace(), 0u);
  EXPECT_EQ(loop::copies().flowQueue, queuedBefore) << "nothing copied into the queue";
  EXPECT_EQ(loop::copies().sendBuffers - copiedBefore, sent.size()) << "each byte copied once";
  EXPECT_EQ(room.joinedPayload(), sent);
  EXPECT_EQ(held.holds(), 0) << "sent: the client's memory is free again";
}

// Resume (outbound.h): kept whole until settled, the messages the peer did
// not receive whole go again on the next connection, in order, under their
// numbers, before anything new — the one cut in the middle whole — and
// their senders see one outcome each, never a failure.
TEST_F(OutboundTest, AResumeSendsAgainWhatThePeerDidNotReceiveWholeInOrder) {
  out_->retain(true);
  const std::string big(30000, 'x');
  MemoryRoom lost(8 * 1024, 3);
  ASSERT_TRUE(send(&lost, 1, "a", "first").ok());
  ASSERT_TRUE(send(&lost, 2, "a", "second").ok());
  ASSERT_TRUE(send(&lost, 3, "b", big).ok());  // started, not finished: the link is full
  ASSERT_TRUE(send(&lost, 4, "a", "queued").ok());
  ASSERT_TRUE(out_->settle(1, 1, Errc::ok));
  EXPECT_EQ(out_->lowestUnsettled(), 2u);
  EXPECT_GT(out_->keptBytes(), big.size());

  // The connection is lost; the next one (the peer's limits again) goes on
  // from message 2, which the peer did not get whole either.
  out_->reset(1 << 20, 1 << 20, /*keepSequence=*/true);
  ASSERT_TRUE(out_->resume(2));
  EXPECT_EQ(out_->resent(), 2u) << "messages 2 and 3";
  ASSERT_TRUE(send(nullptr, 5, "a", "after").ok());
  MemoryRoom next(8 * 1024);
  ASSERT_TRUE(send(&next, 6, "c", "new").ok()) << "queued behind what goes again";
  while (out_->pump(next)) {
  }
  const auto m = next.messages();
  std::vector<uint64_t> seqs;
  for (const auto& r : m)
    if (r.flags & kLastFragment) seqs.push_back(r.seq);
  EXPECT_EQ(seqs, (std::vector<uint64_t>{2, 3, 4, 5, 6}));
  EXPECT_EQ(m.front().seq, 2u);
  EXPECT_EQ(m.front().flags, kFirstFragment | kLastFragment);
  EXPECT_EQ(m.front().payload, "second");
  EXPECT_EQ(next.joinedPayload(3), big) << "message 3 whole, from its first fragment";
  EXPECT_EQ(next.joinedPayload(4), "queued");
  EXPECT_TRUE(events_.outcomes.empty()) << "no sender saw a failure";

  ASSERT_TRUE(out_->settle(2, 6, Errc::ok));
  EXPECT_EQ(events_.deliveredIds, (std::vector<uint64_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_TRUE(out_->settled());
  EXPECT_EQ(out_->keptBytes(), 0u) << "settled messages are not kept";
}

// After a resume the peer writes again the outcomes the sender may have
// missed: one that came on the lost connection as well settles once.
TEST_F(OutboundTest, AfterAResumeAnOutcomeThatComesTwiceSettlesOnce) {
  out_->retain(true);
  MemoryRoom room(16 * 1024);
  for (uint64_t id = 1; id <= 4; id++)
    ASSERT_TRUE(send(&room, id, "svc", "m" + std::to_string(id)).ok());
  ASSERT_TRUE(out_->settle(3, 3, Errc::unknown_service));
  EXPECT_FALSE(out_->settle(3, 3, Errc::unknown_service)) << "twice on one connection";
  out_->reset(1 << 20, 1 << 20, true);
  ASSERT_TRUE(out_->resume(5)) << "the peer has all four";
  EXPECT_EQ(out_->resent(), 0u);
  ASSERT_TRUE(out_->settle(1, 2, Errc::ok));
  ASSERT_TRUE(out_->settle(3, 3, Errc::unknown_service)) << "again, from the peer's log";
  ASSERT_TRUE(out_->settle(1, 4, Errc::ok));
  EXPECT_EQ(events_.deliveredIds, (std::vector<uint64_t>{1, 2, 4}));
  ASSERT_EQ(events_.outcomes.size(), 1u) << "message 3: one outcome";
  EXPECT_EQ(events_.outcomes.at(3).code(), Errc::unknown_service);
  EXPECT_EQ(out_->confirmed(), 4u);
  EXPECT_FALSE(out_->settle(9, 9, Errc::ok)) << "never sent is still a violation";
}

TEST_F(OutboundTest, AResumeFromAMessageNotInFlightOrNotKeptIsRefused) {
  MemoryRoom room(16 * 1024);
  ASSERT_TRUE(send(&room, 1, "svc", "not kept").ok());
  EXPECT_EQ(out_->resume(1).code(), Errc::protocol_error) << "retain was off";
  out_->retain(true);
  ASSERT_TRUE(send(&room, 2, "svc", "kept").ok());
  ASSERT_TRUE(out_->settle(1, 1, Errc::ok));
  const Status past = out_->resume(4);
  EXPECT_EQ(past.code(), Errc::protocol_error);
  EXPECT_EQ(past.message(), "resume from message 4, not one in flight (2 to 2)");
  ASSERT_TRUE(out_->settle(2, 2, Errc::ok));
  EXPECT_EQ(out_->resume(2).code(), Errc::protocol_error) << "message 2 was settled";
  EXPECT_TRUE(out_->resume(3)) << "nothing in flight: the peer expects the next one";
}

// A peer that confirms what it said it did not have, before it went again,
// breaks the protocol: nothing is settled, and the connection closes with it.
TEST_F(OutboundTest, AConfirmationForAMessageNotSentAgainYetIsRefused) {
  out_->retain(true);
  MemoryRoom room(16 * 1024);
  for (uint64_t id = 1; id <= 3; id++)
    ASSERT_TRUE(send(&room, id, "svc", "m" + std::to_string(id)).ok());
  out_->reset(1 << 20, 1 << 20, true);
  ASSERT_TRUE(out_->resume(2));
  ASSERT_TRUE(out_->settle(1, 1, Errc::ok)) << "message 1 the peer had";
  const Status early = out_->settle(2, 2, Errc::ok);
  EXPECT_EQ(early.code(), Errc::protocol_error);
  EXPECT_EQ(early.message(),
            "confirmation for a message not in flight (message 2 is not sent again yet)");
  MemoryRoom next(16 * 1024);
  out_->pump(next);
  std::vector<uint64_t> seqs;
  for (const auto& r : next.messages())
    seqs.push_back(r.seq);
  EXPECT_EQ(seqs, (std::vector<uint64_t>{2, 3})) << "what the peer lacks goes again whole";
  EXPECT_EQ(next.joinedPayload(2), "m2");
  ASSERT_TRUE(out_->settle(2, 3, Errc::ok));
  EXPECT_EQ(events_.deliveredIds, (std::vector<uint64_t>{1, 2, 3}));
}

}  // namespace
}  // namespace rdmamsg::peer
