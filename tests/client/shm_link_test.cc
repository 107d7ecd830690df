// ShmLink (client/shm_link.h), the client's side of the shared-memory link,
// against a daemon's side attached to the same region in this process:
// frames arrive in order, a large SEND lies in the payload area (also
// behind queued frames, in its place), a full ring leaves the rest waiting,
// a claim's block is sent from where it was written, a DELIVER in the
// delivery area is shown, held and given back, and the doorbell rings when
// the client sleeps.
#include "client/shm_link.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <cstdlib>
#include <string>
#include <vector>

namespace rdmamsg::client {
namespace {

constexpr size_t kRing = shm_channel::kMinCapacity;  // 64 KiB each way
constexpr size_t kArea = size_t{1} << 20;

std::span<const std::byte> bytesOf(std::string_view s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

std::vector<std::byte> payloadOf(size_t n, int seed) {
  std::vector<std::byte> p(n);
  for (size_t i = 0; i < n; ++i)
    p[i] = static_cast<std::byte>((i * 7 + seed) & 0xff);
  return p;
}

bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1;
}

bool within(std::span<const std::byte> view, std::span<const std::byte> area) {
  return view.data() >= area.data() && view.data() + view.size() <= area.data() + area.size();
}

proto::Frame decodeOne(std::span<const std::byte> bytes) {
  const Result<proto::Decoded> res = proto::decodeFrame(bytes, proto::maxBodyFor(8u << 20));
  EXPECT_TRUE(res.ok()) << res.status().toString();
  if (!res) return {};
  EXPECT_EQ(res->kind, proto::Decoded::Kind::frame);
  EXPECT_EQ(res->consumed, bytes.size());
  return res->frame;
}

class ShmLinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v :
         {"RDMAMSG_SHM_FRAME_RECORDS", "RDMAMSG_SHM_PAYLOAD_AREA", "RDMAMSG_SHM_DELIVERY_AREA"}) {
      const char* set = std::getenv(v);
      if (set != nullptr && std::string_view(set) == "0") GTEST_SKIP() << v << "=0";
    }
    ConnectOptions opts;
    opts.sendRingCapacity = kRing;
    opts.receiveRingCapacity = kRing;
    opts.payloadAreaCapacity = kArea;
    opts.deliveryAreaCapacity = kArea;
    ByteBuffer offer;
    ASSERT_TRUE(link_.offer(opts, offer));
    EXPECT_EQ(link_.state(), ShmLink::State::offered);
    const proto::Frame f = decodeOne(offer.readable());
    ASSERT_EQ(f.kind, proto::FrameKind::shm_offer);
    std::array<UniqueFd, shm_channel::kFdCount> fds;
    const auto passed = link_.fdsToPass();
    for (size_t i = 0; i < fds.size(); ++i)
      fds[i].reset(::dup(passed[i]));
    Result<ShmChannel> daemon =
        ShmChannel::attach(std::move(fds), f.toDaemonCapacity, f.toClientCapacity);
    ASSERT_TRUE(daemon.ok()) << daemon.status().toString();
    daemon_.emplace(std::move(*daemon));
    int pair[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
    socket_.reset(pair[0]);
    peer_.reset(pair[1]);
    ASSERT_TRUE(link_.start(socket_.get()).ok());
    ASSERT_TRUE(link_.inUse());
  }

  ShmChannel& daemon() { return *daemon_; }

  // What the daemon reads from its ring now (stopping before a frame record).
  std::string daemonReads() {
    ByteBuffer in;
    EXPECT_TRUE(daemon().read(in, SIZE_MAX).ok());
    return std::string(reinterpret_cast<const char*>(in.data()), in.size());
  }

  // The daemon places a DELIVER of `payload` in the delivery area.
  void daemonDelivers(std::span<const std::byte> payload) {
    const size_t size = proto::deliverFrameSize("beta", "feed", "inbox", payload.size());
    auto block = daemon().allocateBlock(size);
    ASSERT_TRUE(block.has_value());
    proto::encodeDeliverAt(block->bytes, "beta", "feed", "inbox", payload);
    Result<std::span<std::byte>> room =
        daemon().reserveFrameRecord(sizeof(shm_payload::Descriptor), shm_ring::kPayloadRecord);
    ASSERT_TRUE(room.ok());
    daemon().publishBlock(*block);
    const shm_payload::Descriptor d = ShmChannel::describe(*block);
    std::memcpy(room->data(), &d, sizeof d);
    ASSERT_TRUE(daemon().commitRecord().ok());
    ASSERT_TRUE(daemon().announce().ok());
  }

  ShmLink link_;
  std::optional<ShmChannel> daemon_;
  UniqueFd socket_, peer_;
};

TEST_F(ShmLinkTest, FramesWrittenArriveInOrder) {
  ByteBuffer out;
  proto::encodeRegister(out, "inbox");
  proto::encodeSend(out, 1, "beta", "inbox", "", bytesOf("small"));
  proto::encodeStatusRequest(out);
  const std::string expected(reinterpret_cast<const char*>(out.data()), out.size());
  ASSERT_TRUE(link_.write(out).ok());
  EXPECT_TRUE(out.empty());
  EXPECT_TRUE(daemonReads() == expected);
}

TEST_F(ShmLinkTest, ALargeSendLiesInThePayloadArea) {
  const std::vector<std::byte> payload = payloadOf(64 * 1024, 1);
  ByteBuffer out;
  Result<ShmLink::LargeSend> sent =
      link_.sendLarge(out, {7, "beta", "inbox", "", payload}, nullptr);
  ASSERT_TRUE(sent.ok()) << sent.status().toString();
  EXPECT_EQ(*sent, ShmLink::LargeSend::written);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(daemonReads(), "");
  ASSERT_TRUE(daemon().frameWaiting());
  EXPECT_TRUE(daemon().frameInPayloadArea());
  Result<std::span<const std::byte>> record = daemon().frameRecord();
  ASSERT_TRUE(record.ok()) << record.status().toString();
  const proto::Frame f = decodeOne(*record);
  EXPECT_EQ(f.kind, proto::FrameKind::send);
  EXPECT_EQ(f.msgId, 7u);
  EXPECT_TRUE(std::equal(f.payload.begin(), f.payload.end(), payload.begin(), payload.end()));
  EXPECT_TRUE(within(f.payload, daemon().payloadArea())) << "posted from where it lies";
}

TEST_F(ShmLinkTest, ASmallSendGoesInTheStream) {
  ByteBuffer out;
  Result<ShmLink::LargeSend> sent =
      link_.sendLarge(out, {1, "beta", "inbox", "", bytesOf("small")}, nullptr);
  ASSERT_TRUE(sent.ok());
  EXPECT_EQ(*sent, ShmLink::LargeSend::inStream);
  EXPECT_TRUE(out.empty()) << "the caller appends it";
}

// A large SEND behind frames the ring has no room for yet: its payload
// record waits in the output buffer, marked, and goes whole in its turn —
// after the frames before it, before the frames after it.
TEST_F(ShmLinkTest, ALargeSendBehindQueuedFramesKeepsItsPlace) {
  ByteBuffer out;
  const std::vector<std::byte> small = payloadOf(1000, 2);
  for (uint64_t id = 1; id <= 100; ++id)  // about 100 KiB: more than the ring holds
    proto::encodeSend(out, id, "beta", "inbox", "", small);
  const std::string before(reinterpret_cast<const char*>(out.data()), out.size());
  const std::vector<std::byte> payload = payloadOf(20000, 3);
  Result<ShmLink::LargeSend> sent =
      link_.sendLarge(out, {101, "beta", "inbox", "", payload}, nullptr);
  ASSERT_TRUE(sent.ok());
  EXPECT_EQ(*sent, ShmLink::LargeSend::queued);
  const size_t mark = out.size();
  proto::encodeUnregister(out, "inbox");
  const std::string after(reinterpret_cast<const char*>(out.data()) + mark, out.size() - mark);
  std::string got;
  bool large = false;
  for (int round = 0; round < 100 && !(out.empty() && !daemon().frameWaiting()); ++round) {
    ASSERT_TRUE(link_.write(out).ok());
    got += daemonReads();
    if (!daemon().frameWaiting()) continue;
    EXPECT_TRUE(got == before) << "the frames before it first";
    const proto::Frame f = decodeOne(daemon().frameRecord().value());
    EXPECT_EQ(f.msgId, 101u);
    EXPECT_TRUE(std::equal(f.payload.begin(), f.payload.end(), payload.begin(), payload.end()));
    ASSERT_TRUE(daemon().consumeFrame().ok());
    large = true;
    got += daemonReads();
  }
  EXPECT_TRUE(large);
  EXPECT_TRUE(out.empty());
  EXPECT_TRUE(got == before + after) << "the frames after it last";
}

TEST_F(ShmLinkTest, WhenTheRingIsFullTheRestWaitsInTheOutputBuffer) {
  ByteBuffer out;
  const std::vector<std::byte> payload = payloadOf(1000, 3);
  for (uint64_t id = 1; id <= 200; ++id)  // about 200 KiB: three rings full
    proto::encodeSend(out, id, "beta", "inbox", "", payload);
  const std::string expected(reinterpret_cast<const char*>(out.data()), out.size());
  std::string got;
  for (int round = 0; round < 100 && !out.empty(); ++round) {
    ASSERT_TRUE(link_.write(out).ok());
    if (round == 0) {
      EXPECT_FALSE(out.empty()) << "more than the ring holds";
    }
    got += daemonReads();
  }
  EXPECT_TRUE(out.empty());
  EXPECT_TRUE(got == expected) << got.size() << " bytes of " << expected.size();
}

TEST_F(ShmLinkTest, AClaimedBlockIsSentFromWhereItWasWritten) {
  EXPECT_FALSE(link_.claimBlock(2000, 1000).has_value()) << "small claims are private";
  const std::vector<std::byte> payload = payloadOf(30000, 4);
  const size_t frameSize = proto::sendFrameSize("beta", "inbox", "", payload.size());
  std::optional<ShmLink::Block> block = link_.claimBlock(frameSize, payload.size());
  ASSERT_TRUE(block.has_value());
  std::span<std::byte> at = block->bytes.last(payload.size());
  std::copy(payload.begin(), payload.end(), at.begin());
  ByteBuffer out;
  Result<ShmLink::LargeSend> sent = link_.sendLarge(out, {9, "beta", "inbox", "", at}, &*block);
  ASSERT_TRUE(sent.ok());
  EXPECT_EQ(*sent, ShmLink::LargeSend::written);
  EXPECT_EQ(daemonReads(), "");
  ASSERT_TRUE(daemon().frameWaiting());
  const proto::Frame f = decodeOne(daemon().frameRecord().value());
  EXPECT_EQ(f.msgId, 9u);
  EXPECT_EQ(f.node, "beta");
  EXPECT_TRUE(std::equal(f.payload.begin(), f.payload.end(), payload.begin(), payload.end()));
}

TEST_F(ShmLinkTest, ADeliveryIsShownHeldWhereItLiesAndGivenBack) {
  const std::vector<std::byte> payload = payloadOf(50000, 5);
  daemonDelivers(payload);
  ByteBuffer in;
  EXPECT_EQ(link_.read(in, 1 << 20).value(), 0u);
  ASSERT_TRUE(link_.deliveryWaiting());
  Result<proto::Frame> f = link_.delivery(in.readable(), proto::maxBodyFor(8u << 20));
  ASSERT_TRUE(f.ok()) << f.status().toString();
  EXPECT_EQ(f->kind, proto::FrameKind::deliver);
  EXPECT_EQ(f->node, "beta");
  EXPECT_TRUE(std::equal(f->payload.begin(), f->payload.end(), payload.begin(), payload.end()));
  Result<ShmLink::FrameHold> hold = link_.holdDelivery();
  ASSERT_TRUE(hold.ok());
  EXPECT_FALSE(link_.deliveryWaiting()) << "the ring goes on while the block is held";
  (void)daemon().allocateBlock(64);  // takes back what was given back
  EXPECT_EQ(daemon().blocksPlaced(), 1u);
  ASSERT_TRUE(link_.releaseDelivery(*hold).ok());
  (void)daemon().allocateBlock(64);
  EXPECT_EQ(daemon().blocksPlaced(), 0u) << "the block is the daemon's again";
}

TEST_F(ShmLinkTest, ADeliveryInsideAFrameIsAProtocolError) {
  daemonDelivers(payloadOf(20000, 6));
  ByteBuffer in;
  EXPECT_EQ(link_.read(in, 1 << 20).value(), 0u);
  ASSERT_TRUE(link_.deliveryWaiting());
  const std::byte partial[3] = {};
  Result<proto::Frame> f = link_.delivery(partial, proto::kDefaultMaxBody);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), Errc::protocol_error);
}

TEST_F(ShmLinkTest, ASleepingClientIsRungWhenTheDaemonWrites) {
  ASSERT_TRUE(link_.armForSleep(false));
  EXPECT_FALSE(readable(link_.pollFd()));
  ASSERT_EQ(daemon().write(bytesOf("wake up")).value(), 7u);
  EXPECT_TRUE(readable(link_.pollFd())) << "fd() is readable: the application wakes";
  Result<bool> rung = link_.disarm();
  ASSERT_TRUE(rung.ok());
  EXPECT_TRUE(*rung);
  ByteBuffer in;
  EXPECT_EQ(link_.read(in, 1 << 20).value(), 7u);
  EXPECT_FALSE(readable(link_.pollFd()));
}

TEST_F(ShmLinkTest, ABatchWakesTheClientOnce) {
  const uint64_t before = link_.counters().wakesSent;
  ASSERT_TRUE(link_.wakeForBatch().ok());
  ASSERT_TRUE(link_.wakeForBatch().ok());
  EXPECT_EQ(link_.counters().wakesSent, before + 1);
  EXPECT_TRUE(readable(link_.pollFd()));
  link_.batchServed();
  ASSERT_TRUE(link_.disarm().ok());
  EXPECT_FALSE(readable(link_.pollFd()));
  ASSERT_TRUE(link_.wakeForBatch().ok());
  EXPECT_EQ(link_.counters().wakesSent, before + 2) << "the next batch wakes again";
}

TEST(ShmLinkStateTest, ARefusedOfferLeavesTheSocket) {
  ShmLink link;
  EXPECT_EQ(link.state(), ShmLink::State::off);
  ConnectOptions opts;
  opts.sendRingCapacity = kRing;
  opts.receiveRingCapacity = kRing;
  ByteBuffer out;
  ASSERT_TRUE(link.offer(opts, out));
  link.refuse();
  EXPECT_EQ(link.state(), ShmLink::State::refused);
  EXPECT_FALSE(link.inUse());
  const std::vector<std::byte> payload = payloadOf(64 * 1024, 7);
  ByteBuffer frames;
  Result<ShmLink::LargeSend> sent =
      link.sendLarge(frames, {1, "beta", "inbox", "", payload}, nullptr);
  ASSERT_TRUE(sent.ok());
  EXPECT_EQ(*sent, ShmLink::LargeSend::inStream) << "in the socket's stream";
  EXPECT_FALSE(link.claimBlock(70000, payload.size()).has_value());
  ClientCounters c;
  link.addCounters(c);
  EXPECT_EQ(c.doorbellRings + c.doorbellReads, 0u);
}

}  // namespace
}  // namespace rdmamsg::client
