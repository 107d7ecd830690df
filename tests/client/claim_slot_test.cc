// ClaimSlot (client/claim_slot.h): a claim's payload lies at the end of its
// block of the payload area, or in a private buffer; the claim knows its
// destination until it ends; and a block is given back by whoever holds
// it — the claim, until the block went with the message.
#include "client/claim_slot.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace rdmamsg::client {
namespace {

ClaimSlot::Block blockOver(std::vector<std::byte>& memory) {
  return ClaimSlot::Block{3, 4096, std::span<std::byte>(memory)};
}

TEST(ClaimSlotTest, AClaimWithoutABlockLiesInAPrivateBuffer) {
  ClaimSlot slot;
  SendClaim c;
  slot.open(c, 7, "beta", "inbox", "orders", 100, std::nullopt);
  EXPECT_TRUE(slot.held());
  EXPECT_TRUE(slot.holds(c));
  EXPECT_EQ(c.handle, 7u);
  EXPECT_FALSE(c.inPlace);
  ASSERT_EQ(c.payload.size(), 100u);
  std::memset(c.payload.data(), 0x5a, c.payload.size());
  EXPECT_EQ(slot.payload().data(), c.payload.data()) << "sent from where it was written";
  EXPECT_EQ(slot.payload()[99], std::byte{0x5a});
  EXPECT_EQ(slot.block(), nullptr);
  EXPECT_EQ(slot.node(), "beta");
  EXPECT_EQ(slot.service(), "inbox");
  EXPECT_EQ(slot.fromService(), "orders");
  EXPECT_EQ(slot.close(c), std::nullopt) << "nothing to give back";
  EXPECT_FALSE(slot.held());
  EXPECT_EQ(c.handle, 0u);
  EXPECT_TRUE(c.payload.empty());
}

TEST(ClaimSlotTest, AClaimInABlockLiesAtItsEndAndIsGivenBackAtClose) {
  std::vector<std::byte> memory(1000);
  ClaimSlot slot;
  SendClaim c;
  slot.open(c, 1, "beta", "inbox", "", 600, blockOver(memory));
  EXPECT_TRUE(c.inPlace);
  EXPECT_EQ(c.payload.data(), memory.data() + 400) << "the SEND's head goes in front of it";
  EXPECT_EQ(c.payload.size(), 600u);
  EXPECT_EQ(slot.payload().data(), c.payload.data());
  ASSERT_NE(slot.block(), nullptr);
  EXPECT_EQ(slot.block()->slot, 3u);
  std::optional<ClaimSlot::Block> back = slot.close(c);
  ASSERT_TRUE(back.has_value()) << "an aborted claim's block goes back to the area";
  EXPECT_EQ(back->offset, 4096u);
}

TEST(ClaimSlotTest, ABlockGivenToTheMessageIsNotTheClaimsToFree) {
  std::vector<std::byte> memory(1000);
  ClaimSlot slot;
  SendClaim c;
  slot.open(c, 1, "beta", "inbox", "", 600, blockOver(memory));
  slot.giveBlock();
  EXPECT_TRUE(slot.blockGiven());
  EXPECT_EQ(slot.close(c), std::nullopt);
  // The next claim starts afresh.
  slot.open(c, 2, "beta", "inbox", "", 600, blockOver(memory));
  EXPECT_FALSE(slot.blockGiven());
  EXPECT_TRUE(slot.close(c).has_value());
}

TEST(ClaimSlotTest, OnlyTheClaimHeldIsHeld) {
  ClaimSlot slot;
  SendClaim c, other;
  EXPECT_FALSE(slot.holds(c)) << "handle 0 is never held";
  slot.open(c, 5, "beta", "inbox", "", 10, std::nullopt);
  other.handle = 4;
  EXPECT_FALSE(slot.holds(other));
  SendClaim stale = c;
  (void)slot.close(c);
  EXPECT_FALSE(slot.holds(stale)) << "committed or aborted already";
}

}  // namespace
}  // namespace rdmamsg::client
