// Unit tests of HeldMessages (daemon/held.h): messages from peers held for
// listeners that do not keep up, per flow, within the flow window.
#include "daemon/held.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace rdmamsg {
namespace {

using peer::Peer;

// HeldMessages uses peers only as keys and hands them back to its callbacks.
struct FakePeer {
  alignas(alignof(std::max_align_t)) unsigned char storage[64]{};
  Peer& ref() { return *reinterpret_cast<Peer*>(storage); }
};

struct Confirmed {
  Peer* from;
  uint64_t epoch, seq;
  Errc errc;
};

std::span<const std::byte> bytes(std::string_view s) {
  return std::as_bytes(std::span(s));
}

class Held : public ::testing::Test {
 protected:
  static constexpr uint64_t kWindow = 1000;
  FakePeer a, b;
  std::vector<Confirmed> confirmed;
  HeldMessages held{kWindow, [this](Peer& from, uint64_t epoch, uint64_t seq, Errc errc) {
                      confirmed.push_back({&from, epoch, seq, errc});
                    }};
  std::vector<std::string> delivered;
  size_t room = 0;  // messages the listener takes before it is congested again

  HeldMessages::Deliver listener() {
    return [this](Peer& from, std::string_view src, std::span<const std::byte> payload) {
      if (room == 0) return false;
      room--;
      delivered.push_back(
          std::string(&from == &a.ref() ? "a:" : "b:") + std::string(src) + ":" +
          std::string(reinterpret_cast<const char*>(payload.data()), payload.size()));
      return true;
    };
  }
};

TEST_F(Held, DeliversInOrderPerFlowAndConfirmsEach) {
  for (uint64_t seq = 1; seq <= 3; seq++)
    ASSERT_TRUE(held.hold(a.ref(), 7, seq, "src", "svc", bytes("m" + std::to_string(seq)), 10));
  EXPECT_TRUE(held.waiting(a.ref(), "svc"));
  EXPECT_FALSE(held.waiting(b.ref(), "svc"));
  EXPECT_EQ(held.messages(), 3u);
  EXPECT_EQ(held.bytes(), 30u);
  room = 2;
  held.drain("svc", listener());
  ASSERT_EQ(delivered, (std::vector<std::string>{"a:src:m1", "a:src:m2"}));
  ASSERT_EQ(confirmed.size(), 2u);
  EXPECT_EQ(confirmed[0].seq, 1u);
  EXPECT_EQ(confirmed[1].seq, 2u);
  EXPECT_EQ(confirmed[0].epoch, 7u);
  EXPECT_EQ(confirmed[0].errc, Errc::ok);
  EXPECT_EQ(held.messages(), 1u);
  room = 10;
  held.drain("svc", listener());
  EXPECT_EQ(delivered.back(), "a:src:m3");
  EXPECT_TRUE(held.empty());
  EXPECT_FALSE(held.waiting(a.ref(), "svc"));
}

TEST_F(Held, FlowsOfOneServiceTakeTurns) {
  for (uint64_t seq = 1; seq <= 2; seq++) {
    ASSERT_TRUE(held.hold(a.ref(), 1, seq, "x", "svc", bytes("a" + std::to_string(seq)), 10));
    ASSERT_TRUE(held.hold(b.ref(), 1, seq, "y", "svc", bytes("b" + std::to_string(seq)), 10));
  }
  EXPECT_EQ(held.flows(), 2u);
  room = 4;
  held.drain("svc", listener());
  EXPECT_EQ(delivered, (std::vector<std::string>{"a:x:a1", "b:y:b1", "a:x:a2", "b:y:b2"}));
}

TEST_F(Held, MoreThanTheWindowIsRefused) {
  ASSERT_TRUE(held.hold(a.ref(), 1, 1, "s", "svc", bytes("x"), 600));  // one message may exceed
  EXPECT_TRUE(held.hold(a.ref(), 1, 2, "s", "svc", bytes("x"), 400));
  EXPECT_FALSE(held.hold(a.ref(), 1, 3, "s", "svc", bytes("x"), 1)) << "over the window";
  EXPECT_EQ(held.messages(), 2u);
  // Another flow has its own window.
  EXPECT_TRUE(held.hold(b.ref(), 1, 1, "s", "svc", bytes("x"), 900));
  EXPECT_TRUE(held.hold(a.ref(), 1, 1, "s", "other", bytes("x"), 2000));
}

TEST_F(Held, AListenerThatGoesAwayFailsWhatIsHeldForIt) {
  ASSERT_TRUE(held.hold(a.ref(), 3, 5, "s", "svc", bytes("x"), 10));
  ASSERT_TRUE(held.hold(a.ref(), 3, 6, "s", "other", bytes("y"), 10));
  held.fail("svc", Errc::unknown_service);
  ASSERT_EQ(confirmed.size(), 1u);
  EXPECT_EQ(confirmed[0].seq, 5u);
  EXPECT_EQ(confirmed[0].errc, Errc::unknown_service);
  EXPECT_EQ(held.messages(), 1u);
}

TEST_F(Held, ALostConnectionDropsItsMessagesWithoutConfirming) {
  ASSERT_TRUE(held.hold(a.ref(), 1, 1, "s", "svc", bytes("x"), 10));
  ASSERT_TRUE(held.hold(b.ref(), 1, 1, "s", "svc", bytes("y"), 10));
  held.drop(a.ref());
  EXPECT_TRUE(confirmed.empty());
  EXPECT_EQ(held.messages(), 1u);
  EXPECT_EQ(held.bytes(), 10u);
  EXPECT_FALSE(held.waiting(a.ref(), "svc"));
  EXPECT_TRUE(held.waiting(b.ref(), "svc"));
}

TEST_F(Held, MessagesHeldPastTheTimeoutFail) {
  ASSERT_TRUE(held.hold(a.ref(), 1, 1, "s", "svc", bytes("x"), 10));
  auto now = HeldMessages::Clock::now();
  held.expire(now, std::chrono::milliseconds(60000));
  EXPECT_TRUE(confirmed.empty());
  held.expire(now + std::chrono::seconds(61), std::chrono::milliseconds(60000));
  ASSERT_EQ(confirmed.size(), 1u);
  EXPECT_EQ(confirmed[0].errc, Errc::timeout);
  EXPECT_TRUE(held.empty());
}

}  // namespace
}  // namespace rdmamsg
