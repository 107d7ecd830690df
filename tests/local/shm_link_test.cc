// ShmLink (daemon/local/shm_link.h) against a real client side of a
// shared-memory channel: records read into the session's buffer on the
// client's ring, large SENDs held where they lie until the last handle
// lets go, a corrupt ring breaks the link, output waits for room, and a
// spill is asked of the holders, never done inside the link's call.
#include "daemon/local/shm_link.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/local_protocol.h"
#include "daemon/loop/event_loop.h"

namespace rdmamsg::local {
namespace {

using namespace std::chrono_literals;

constexpr size_t kRing = shm_channel::kMinCapacity;  // 64 KiB each way

std::span<const std::byte> bytesOf(std::string_view s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

class ShmLinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    client_ = std::make_unique<ShmChannel>(ShmChannel::create(kRing, kRing).value());
    std::array<UniqueFd, shm_channel::kFdCount> fds;
    const auto passed = client_->fdsToPass();
    for (size_t i = 0; i < fds.size(); ++i)
      fds[i].reset(::dup(passed[i]));
    auto daemon =
        std::make_unique<ShmChannel>(ShmChannel::attach(std::move(fds), kRing, kRing).value());
    link_ = std::make_unique<ShmLink>(loop_, std::move(daemon), "client#1", [this] { rung_++; });
  }

  // Runs the loop until `cond` holds, at most 2 s.
  template <typename Cond>
  bool runUntil(Cond cond) {
    const auto deadline = std::chrono::steady_clock::now() + 2s;
    while (!cond() && std::chrono::steady_clock::now() < deadline)
      loop_.runOnce(10ms);
    return cond();
  }

  // The client writes a SEND of `payload` as one frame record.
  void clientSendsFrameRecord(uint64_t msgId, const std::string& payload) {
    const size_t size = proto::sendFrameSize("beta", "svc", "", payload.size());
    Result<std::span<std::byte>> room = client_->reserveFrameRecord(size);
    ASSERT_TRUE(room.ok()) << room.status().toString();
    proto::encodeSendAt(room->first(size), msgId, "beta", "svc", "", bytesOf(payload));
    ASSERT_TRUE(client_->commitRecord().ok());
    ASSERT_TRUE(client_->announce().ok());
  }

  loop::EventLoop loop_;
  std::unique_ptr<ShmChannel> client_;
  std::unique_ptr<ShmLink> link_;
  int rung_ = 0;
};

TEST_F(ShmLinkTest, TheClientsRingRunsTheSessionsCallbackAndRecordsAreReadIntoItsBuffer) {
  ASSERT_TRUE(link_->armForSleep(true)) << "nothing written yet: the link may sleep";
  ByteBuffer frames;
  proto::encodeConsumed(frames, 7);
  ASSERT_EQ(client_->write(frames.readable()).value(), frames.size());  // rings: the daemon sleeps
  ASSERT_TRUE(runUntil([&] { return rung_ > 0; })) << "the doorbell's callback never ran";
  ASSERT_TRUE(link_->disarm());
  ByteBuffer in;
  ASSERT_TRUE(link_->read(in, 1 << 20));
  const Result<proto::Decoded> d = proto::decodeFrame(in.readable(), 1 << 20);
  ASSERT_TRUE(d.ok()) << d.status().toString();
  ASSERT_EQ(d->kind, proto::Decoded::Kind::frame);
  EXPECT_EQ(d->frame.kind, proto::FrameKind::consumed);
  EXPECT_EQ(d->frame.msgId, 7u);
  EXPECT_EQ(link_->state(), ShmLink::State::open);
}

TEST_F(ShmLinkTest, ALargeSendIsHeldWhereItLiesUntilTheLastHandleLetsGo) {
  const std::string payload(20 * 1024, 'p');
  clientSendsFrameRecord(1, payload);
  ByteBuffer in;
  ASSERT_TRUE(link_->read(in, 1 << 20));
  EXPECT_TRUE(in.empty()) << "a frame record is not copied into the buffer";
  ASSERT_TRUE(link_->frameWaiting());
  ShmLink::FrameRecord rec = link_->takeFrameRecord(proto::maxBodyFor(1 << 20));
  ASSERT_TRUE(rec.error.ok()) << rec.error.toString();
  ASSERT_TRUE(static_cast<bool>(rec.payload)) << "20 KiB is held in place";
  EXPECT_EQ(rec.frame.msgId, 1u);
  EXPECT_EQ(rec.frame.service, "svc");
  ASSERT_EQ(rec.frame.payload.size(), payload.size());
  EXPECT_EQ(std::memcmp(rec.frame.payload.data(), payload.data(), payload.size()), 0);
  const std::byte* at = rec.frame.payload.data();
  EXPECT_TRUE(at >= rec.payload.area().bytes().data() &&
              at + payload.size() <=
                  rec.payload.area().bytes().data() + rec.payload.area().bytes().size())
      << "the payload lies in the ring the devices register";

  PayloadHandle share = rec.payload.share();  // a send posted from it
  const uint64_t heldBefore = link_->heldBytes();
  EXPECT_GE(heldBefore, payload.size());
  rec.payload.reset();
  EXPECT_EQ(link_->heldBytes(), heldBefore) << "another handle still holds it";
  share.reset();
  EXPECT_EQ(link_->heldBytes(), 0u) << "the last handle gave the room back";
}

TEST_F(ShmLinkTest, ASmallSendInAFrameRecordIsCopiedAndItsRecordReleasedAtOnce) {
  clientSendsFrameRecord(2, "small");
  ByteBuffer in;
  ASSERT_TRUE(link_->read(in, 1 << 20));
  ShmLink::FrameRecord rec = link_->takeFrameRecord(proto::maxBodyFor(1 << 20));
  ASSERT_TRUE(rec.error.ok());
  EXPECT_FALSE(static_cast<bool>(rec.payload));
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(rec.frame.payload.data()),
                        rec.frame.payload.size()),
            "small");
  EXPECT_EQ(link_->heldBytes(), 0u);
}

TEST_F(ShmLinkTest, AFrameRecordThatIsNotASendIsAProtocolErrorAndTakesNothing) {
  ByteBuffer frame;
  proto::encodeConsumed(frame, 1);
  Result<std::span<std::byte>> room = client_->reserveFrameRecord(frame.size());
  ASSERT_TRUE(room.ok());
  std::memcpy(room->data(), frame.data(), frame.size());
  ASSERT_TRUE(client_->commitRecord().ok());
  ByteBuffer in;
  ASSERT_TRUE(link_->read(in, 1 << 20));
  ShmLink::FrameRecord rec = link_->takeFrameRecord(proto::maxBodyFor(1 << 20));
  EXPECT_EQ(rec.error.code(), Errc::protocol_error);
  EXPECT_FALSE(static_cast<bool>(rec.payload));
}

class Holder final : public ExternalHolder {
 public:
  void spillRequested(ExternalArea& area) override { requests.push_back(&area); }
  std::vector<ExternalArea*> requests;
};

TEST_F(ShmLinkTest, PastHalfOfTheRingHeldItsHoldersAreAskedToSpillAndNothingIsSpilledInTheCall) {
  const std::string payload(20 * 1024, 'q');
  std::vector<PayloadHandle> held;
  Holder holder;
  for (uint64_t id = 1; id <= 2; id++) {
    clientSendsFrameRecord(id, payload);
    ByteBuffer in;
    ASSERT_TRUE(link_->read(in, 1 << 20));
    ShmLink::FrameRecord rec = link_->takeFrameRecord(proto::maxBodyFor(1 << 20));
    ASSERT_TRUE(rec.error.ok());
    if (id == 1) {
      EXPECT_TRUE(holder.requests.empty()) << "20 KiB of a 64 KiB ring held: nothing asked";
      rec.payload.area().addHolder(&holder);  // a peer's queue keeps it waiting
    }
    held.push_back(std::move(rec.payload));
  }
  ASSERT_EQ(holder.requests.size(), 1u) << "past half of the ring held: the holders are asked";
  EXPECT_EQ(holder.requests.front(), &held.front().area());
  EXPECT_GT(link_->heldBytes(), kRing / 2) << "and nothing was let go inside the link's call";
  held.front().area().removeHolder(&holder);
  held.clear();
  EXPECT_EQ(link_->heldBytes(), 0u);
}

TEST_F(ShmLinkTest, ACorruptRingBreaksTheLinkWithAProtocolError) {
  // A record header whose length runs past the ring: what a hostile client
  // can write into its own memory.
  ByteBuffer frames;
  proto::encodeConsumed(frames, 1);
  ASSERT_EQ(client_->write(frames.readable()).value(), frames.size());
  auto* data = const_cast<std::byte*>(link_->channel().inputArea().data());
  const uint32_t huge = 0x7fffffff;
  std::memcpy(data, &huge, sizeof huge);
  ByteBuffer in;
  EXPECT_FALSE(link_->read(in, 1 << 20));
  EXPECT_EQ(link_->state(), ShmLink::State::broken);
  EXPECT_EQ(link_->status().code(), Errc::protocol_error);
  ByteBuffer out;
  proto::encodeConsumed(out, 2);
  EXPECT_EQ(link_->flush(out), FlushResult::failed) << "a broken link writes nothing";
  EXPECT_FALSE(link_->writeInPlace(8, [](std::span<std::byte>) {}));
  link_->close();
  EXPECT_EQ(link_->state(), ShmLink::State::closed);
}

TEST_F(ShmLinkTest, OutputWaitsForRoomAndTheClientsReleaseRingsTheDaemon) {
  ByteBuffer out;
  const std::string text(1000, 'd');
  while (out.size() < 2 * kRing)
    proto::encodeStatusReply(out, text);
  EXPECT_EQ(link_->flush(out), FlushResult::blocked);
  EXPECT_TRUE(link_->waitingForRoom());
  EXPECT_FALSE(out.empty());
  ByteBuffer got;
  ASSERT_GT(client_->read(got, SIZE_MAX).value(), 0u);  // the client takes some: rings
  ASSERT_TRUE(runUntil([&] { return rung_ > 0; })) << "the daemon was not rung for room";
  ASSERT_TRUE(link_->disarm());
  const size_t before = out.size();
  link_->flush(out);
  EXPECT_LT(out.size(), before) << "room came back";
}

}  // namespace
}  // namespace rdmamsg::local
