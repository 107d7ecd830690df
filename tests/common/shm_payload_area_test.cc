// The areas of a shared-memory channel (common/shm_payload_area.h): the
// client writes large frames into blocks of the payload area and names them
// with payload records; the daemon holds blocks in any order and gives each
// back on its own, so one held for long pins nothing else; a record that
// names no block of the area is refused with the reason. The delivery area
// is the same the other way round.
#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <string>
#include <vector>

#include "common/shm_channel.h"
#include "common/shm_payload_area.h"

namespace rdmamsg {
namespace {

using shm_payload::Descriptor;
using shm_payload::PayloadAllocator;

constexpr size_t kRing = shm_channel::kMinCapacity;
constexpr size_t kArea = shm_payload::kMinCapacity;  // 64 KiB

struct Pair {
  ShmChannel client;
  ShmChannel daemon;
};

Pair makePair(size_t area = kArea, size_t delivery = 0) {
  ShmChannel client = ShmChannel::create(kRing, kRing, area, delivery).value();
  std::array<UniqueFd, shm_channel::kFdCount> fds;
  const auto passed = client.fdsToPass();
  for (size_t i = 0; i < fds.size(); ++i)
    fds[i].reset(::dup(passed[i]));
  ShmChannel daemon = ShmChannel::attach(std::move(fds), kRing, kRing).value();
  EXPECT_EQ(daemon.payloadCapacity(), area) << "the area the client's ring names";
  EXPECT_EQ(daemon.deliveryCapacity(), delivery) << "the area the daemon's ring names";
  return {std::move(client), std::move(daemon)};
}

void putRecord(ShmChannel& client, const Descriptor& d) {
  auto room = client.reserveFrameRecord(sizeof d, shm_ring::kPayloadRecord);
  ASSERT_TRUE(room.ok()) << room.status().toString();
  std::memcpy(room->data(), &d, sizeof d);
  ASSERT_TRUE(client.commitRecord().ok());
}

// A block written with `text`, its payload record published.
PayloadAllocator::Block putBlock(ShmChannel& client, const std::string& text) {
  auto block = client.allocateBlock(text.size());
  EXPECT_TRUE(block.has_value());
  if (!block) return {};
  std::memcpy(block->bytes.data(), text.data(), text.size());
  client.publishBlock(*block);
  putRecord(client, ShmChannel::describe(*block));
  return *block;
}

std::string asText(std::span<const std::byte> b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

// Reads up to the next frame waiting; it must be a block of the area the
// other side places blocks in.
std::string nextBlock(ShmChannel& daemon) {
  ByteBuffer in;
  EXPECT_TRUE(daemon.read(in, SIZE_MAX).ok());
  EXPECT_TRUE(daemon.frameWaiting());
  EXPECT_TRUE(daemon.frameInPayloadArea());
  auto frame = daemon.frameRecord();
  EXPECT_TRUE(frame.ok()) << frame.status().toString();
  return frame ? asText(*frame) : std::string();
}

TEST(ShmPayloadAreaTest, BlocksHeldAreGivenBackInAnyOrderAndEachPinsOnlyItself) {
  Pair p = makePair();
  const std::string a(20000, 'a'), b(20000, 'b'), c(20000, 'c');
  putBlock(p.client, a);
  putBlock(p.client, b);
  putBlock(p.client, c);
  EXPECT_FALSE(p.client.allocateBlock(20000).has_value()) << "the area is full";

  std::vector<ShmChannel::FrameHold> held;
  for (const std::string* want : {&a, &b, &c}) {
    EXPECT_EQ(nextBlock(p.daemon), *want);
    auto hold = p.daemon.holdFrame();
    ASSERT_TRUE(hold.ok()) << hold.status().toString();
    EXPECT_TRUE(hold->inPayloadArea());
    held.push_back(*hold);
  }
  EXPECT_EQ(p.daemon.blocksHeld(), 3u);
  EXPECT_EQ(p.daemon.heldBytes(), 0u) << "the ring's records were released at once";

  // The middle block comes back first: its room is the client's again while
  // the first one (a message that waits for a listener) is still held.
  ASSERT_TRUE(p.daemon.releaseHeld(held[1]).ok());
  EXPECT_FALSE(p.daemon.releaseHeld(held[1]).ok()) << "given back twice";
  auto again = p.client.allocateBlock(20000);
  ASSERT_TRUE(again.has_value());
  EXPECT_NE(again->slot, held[0].slot);
  p.client.freeBlock(*again);

  ASSERT_TRUE(p.daemon.releaseHeld(held[0]).ok());
  ASSERT_TRUE(p.daemon.releaseHeld(held[2]).ok());
  EXPECT_EQ(p.daemon.blocksHeld(), 0u);
  auto whole = p.client.allocateBlock(kArea);
  EXPECT_TRUE(whole.has_value()) << "freed blocks join again into the whole area";
}

TEST(ShmPayloadAreaTest, ABlockCopiedOutIsTheClientsAgainAtOnce) {
  Pair p = makePair();
  const std::string a(40000, 'a');
  putBlock(p.client, a);
  EXPECT_EQ(nextBlock(p.daemon), a);
  ASSERT_TRUE(p.daemon.consumeFrame().ok());
  EXPECT_EQ(p.daemon.blocksHeld(), 0u);
  EXPECT_TRUE(p.client.allocateBlock(40000).has_value());
}

TEST(ShmPayloadAreaTest, TheAllocatorFallsBackWhenEverySlotIsInUse) {
  Pair p = makePair();
  std::vector<PayloadAllocator::Block> blocks;
  for (size_t i = 0; i < shm_payload::kSlots; ++i) {
    auto b = p.client.allocateBlock(64);
    ASSERT_TRUE(b.has_value()) << i;
    blocks.push_back(*b);
  }
  EXPECT_FALSE(p.client.allocateBlock(64).has_value()) << "no slot left";
  p.client.freeBlock(blocks[7]);
  EXPECT_TRUE(p.client.allocateBlock(64).has_value());
}

// What a hostile client can name in a payload record; each is refused with
// its reason, and nothing outside the area is shown.
TEST(ShmPayloadAreaTest, ARecordThatNamesNoBlockOfTheAreaIsRefusedWithTheReason) {
  struct Case {
    Descriptor d;
    const char* reason;
  };
  const std::vector<Case> cases = {
      {{shm_payload::kSlots, 0, 0, 100}, "slot 256 is not below 256"},
      {{1, 7, 0, 100}, "reserved field is not 0"},
      {{1, 0, kArea, 1}, "is not inside the area"},
      {{1, 0, kArea - 10, 11}, "is not inside the area"},
      {{1, 0, 8, UINT64_MAX}, "is not inside the area"},
      {{1, 0, 0, 0}, "is not inside the area"},
  };
  for (const Case& c : cases) {
    Pair p = makePair();
    putRecord(p.client, c.d);
    ByteBuffer in;
    ASSERT_TRUE(p.daemon.read(in, SIZE_MAX).ok());
    ASSERT_TRUE(p.daemon.frameWaiting());
    auto frame = p.daemon.frameRecord();
    ASSERT_FALSE(frame.ok()) << c.reason;
    EXPECT_NE(frame.status().message().find(c.reason), std::string::npos)
        << frame.status().message();
    EXPECT_FALSE(p.daemon.holdFrame().ok());
  }
}

TEST(ShmPayloadAreaTest, ASlotStillHeldCannotBeNamedAgain) {
  Pair p = makePair();
  putBlock(p.client, std::string(1000, 'x'));
  nextBlock(p.daemon);
  auto hold = p.daemon.holdFrame();
  ASSERT_TRUE(hold.ok());
  putRecord(p.client, {hold->slot, 0, 0, 1000});  // the same slot, still held
  ByteBuffer in;
  ASSERT_TRUE(p.daemon.read(in, SIZE_MAX).ok());
  auto frame = p.daemon.frameRecord();
  ASSERT_FALSE(frame.ok());
  EXPECT_NE(frame.status().message().find("is still in use"), std::string::npos);
}

TEST(ShmPayloadAreaTest, AChannelWithoutAnAreaRefusesPayloadRecordsAndBadCapacities) {
  Pair p = makePair(0);
  EXPECT_FALSE(p.client.allocateBlock(100).has_value());
  putRecord(p.client, {0, 0, 0, 100});
  ByteBuffer in;
  ASSERT_TRUE(p.daemon.read(in, SIZE_MAX).ok());
  auto frame = p.daemon.frameRecord();
  ASSERT_FALSE(frame.ok());
  EXPECT_NE(frame.status().message().find("has no payload area"), std::string::npos);

  for (uint64_t bad : {uint64_t{4096}, uint64_t{100000}, uint64_t{1} << 30}) {
    auto c = ShmChannel::create(kRing, kRing, bad);
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_NE(c.status().message().find("payload area capacity"), std::string::npos);
  }
}

// A region that holds more than both rings but no payload area of a valid
// size (a header page and a power of two) is refused.
TEST(ShmPayloadAreaTest, TheDaemonRefusesARegionWhoseRestIsNoPayloadArea) {
  const size_t rings = 2 * shm_ring::regionSize(kRing);
  for (size_t rest : {size_t{4096}, size_t{4096} + 1000, shm_payload::kHeaderSize + 3 * kArea}) {
    ShmRegion region = ShmRegion::create("odd", rings + rest).value();
    ASSERT_TRUE(shm_ring::format(region.bytes().first(rings / 2), kRing).ok());
    ASSERT_TRUE(shm_ring::format(region.bytes().subspan(rings / 2, rings / 2), kRing).ok());
    ShmDoorbell a = ShmDoorbell::create().value(), b = ShmDoorbell::create().value();
    std::array<UniqueFd, shm_channel::kFdCount> fds{
        UniqueFd(::dup(region.fd())), UniqueFd(::dup(a.fd())), UniqueFd(::dup(b.fd()))};
    auto daemon = ShmChannel::attach(std::move(fds), kRing, kRing);
    ASSERT_FALSE(daemon.ok()) << rest;
    EXPECT_NE(daemon.status().message().find("not a payload area"), std::string::npos)
        << daemon.status().message();
  }
}

// The delivery area: the daemon places DELIVER frames in blocks, the
// client holds them (views) and gives them back in any order; a block the
// client holds is never placed again until it is given back.
TEST(ShmPayloadAreaTest, TheDeliveryAreaCarriesBlocksFromTheDaemonGivenBackInAnyOrder) {
  Pair p = makePair(0, kArea);
  EXPECT_TRUE(p.daemon.placesBlocks());
  EXPECT_FALSE(p.client.placesBlocks()) << "the client has no payload area";
  const std::string a(30000, 'a'), b(30000, 'b');
  const PayloadAllocator::Block first = putBlock(p.daemon, a);
  putBlock(p.daemon, b);
  EXPECT_FALSE(p.daemon.allocateBlock(30000).has_value()) << "the area is full";

  EXPECT_EQ(nextBlock(p.client), a);
  auto heldA = p.client.holdFrame();
  ASSERT_TRUE(heldA.ok()) << heldA.status().toString();
  EXPECT_EQ(heldA->slot, first.slot);
  EXPECT_EQ(nextBlock(p.client), b);
  ASSERT_TRUE(p.client.consumeFrame().ok());  // copied out: given back at once
  EXPECT_EQ(p.client.heldBytes(), 0u) << "the ring's records were released at once";

  auto again = p.daemon.allocateBlock(30000);
  ASSERT_TRUE(again.has_value()) << "b's block is the daemon's again";
  EXPECT_NE(again->slot, first.slot);
  EXPECT_NE(again->offset, first.offset) << "a held block is not placed again";
  p.daemon.freeBlock(*again);
  EXPECT_EQ(p.daemon.blocksPlaced(), 1u);

  ASSERT_TRUE(p.client.releaseHeld(*heldA).ok());
  EXPECT_TRUE(p.daemon.allocateBlock(kArea).has_value()) << "both blocks joined again";
}

// A block placed for a message still arriving is not the other side's
// yet: a release word cleared early (a hostile client's) neither frees it
// nor lets it be placed twice, and giving it back twice gives it back once.
TEST(ShmPayloadAreaTest, AWordClearedBeforeItsBlockIsPublishedChangesNothing) {
  std::vector<std::byte> header(shm_payload::kHeaderSize), data(kArea);
  PayloadAllocator a(header, data);
  auto room = a.allocate(20000);
  ASSERT_TRUE(room.has_value());
  shm_payload::releaseWord(header, room->slot).store(0);
  auto next = a.allocate(20000);
  ASSERT_TRUE(next.has_value());
  EXPECT_NE(next->slot, room->slot);
  EXPECT_GE(next->offset, room->offset + room->bytes.size()) << "no two blocks overlap";
  a.publish(*next);
  EXPECT_EQ(shm_payload::releaseWord(header, next->slot).load(), 1u);
  a.free(*room);
  a.free(*room);  // given back once
  std::vector<PayloadAllocator::Block> blocks;
  while (auto b = a.allocate(20000))
    blocks.push_back(*b);
  EXPECT_EQ(blocks.size(), 2u) << "the area holds three blocks: one in use, two free";
}

// The rings' headers name the areas; a region that does not hold exactly
// those (a lying header, a capacity that is no area's) is refused.
TEST(ShmPayloadAreaTest, TheDaemonRefusesAreasTheRegionDoesNotHold) {
  const size_t ring = shm_ring::regionSize(kRing);
  struct Case {
    uint64_t payload, delivery;
    size_t rest;
    const char* reason;
  };
  const std::vector<Case> cases = {
      {0, kArea, 0, "not a payload area of 0 and a delivery area of 65536 bytes"},
      {kArea, kArea, shm_payload::regionSize(kArea), "a delivery area of 65536 bytes"},
      {0, 3 * kArea, shm_payload::regionSize(3 * kArea), "delivery area capacity 196608"},
      {4096, 0, shm_payload::regionSize(4096), "payload area capacity 4096"},
  };
  for (const Case& c : cases) {
    ShmRegion region = ShmRegion::create("lying", 2 * ring + c.rest).value();
    ASSERT_TRUE(shm_ring::format(region.bytes().first(ring), kRing, c.payload).ok());
    ASSERT_TRUE(shm_ring::format(region.bytes().subspan(ring, ring), kRing, c.delivery).ok());
    ShmDoorbell a = ShmDoorbell::create().value(), b = ShmDoorbell::create().value();
    std::array<UniqueFd, shm_channel::kFdCount> fds{
        UniqueFd(::dup(region.fd())), UniqueFd(::dup(a.fd())), UniqueFd(::dup(b.fd()))};
    auto daemon = ShmChannel::attach(std::move(fds), kRing, kRing);
    ASSERT_FALSE(daemon.ok()) << c.reason;
    EXPECT_NE(daemon.status().message().find(c.reason), std::string::npos)
        << daemon.status().message();
  }
}

}  // namespace
}  // namespace rdmamsg
