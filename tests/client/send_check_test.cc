// SendCheck and HeldDestinations (client/send_check.h,
// client/held_destinations.h): a message to a name the protocol does not
// allow, or larger than the daemon's maximum, is refused before it is
// queued — also after a valid stream to another name; a destination the
// daemon holds stays held until its RESUME, others are not held.
#include "client/send_check.h"

#include <gtest/gtest.h>

#include <string>

#include "client/held_destinations.h"

namespace rdmamsg::client {
namespace {

constexpr uint32_t kMax = 1000;

TEST(SendCheckTest, ValidNamesAndSizesPass) {
  SendCheck c;
  EXPECT_TRUE(c.check("alpha", "inbox", "", 0, kMax).ok());
  EXPECT_TRUE(c.check("alpha", "inbox", "orders", kMax, kMax).ok());
  EXPECT_TRUE(c.check("node-2.b_c", "in.box-1", "", 10, kMax).ok());
}

TEST(SendCheckTest, AnInvalidNameIsABadRequestNamingIt) {
  SendCheck c;
  Status st = c.check("al pha", "inbox", "", 1, kMax);
  EXPECT_EQ(st.code(), Errc::bad_request);
  EXPECT_NE(st.message().find("node name 'al pha'"), std::string::npos) << st.toString();
  st = c.check("alpha", std::string(64, 's'), "", 1, kMax);
  EXPECT_EQ(st.code(), Errc::bad_request);
  EXPECT_NE(st.message().find("service name"), std::string::npos) << st.toString();
  EXPECT_EQ(c.check("alpha", "inbox", "bad/from", 1, kMax).code(), Errc::bad_request);
}

TEST(SendCheckTest, EmptyNamesAreRefusedEvenFirst) {
  SendCheck c;
  EXPECT_EQ(c.check("", "inbox", "", 1, kMax).code(), Errc::bad_request);
  EXPECT_EQ(c.check("alpha", "", "", 1, kMax).code(), Errc::bad_request);
}

// The last valid names are remembered; a stream that changes to an
// invalid name is still refused, and the valid one passes again.
TEST(SendCheckTest, AnInvalidNameAfterAValidStreamIsStillRefused) {
  SendCheck c;
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(c.check("alpha", "inbox", "", 1, kMax).ok());
  EXPECT_EQ(c.check("alpha!", "inbox", "", 1, kMax).code(), Errc::bad_request);
  EXPECT_EQ(c.check("alpha", "inbox?", "", 1, kMax).code(), Errc::bad_request);
  EXPECT_TRUE(c.check("alpha", "inbox", "", 1, kMax).ok());
}

TEST(SendCheckTest, AMessageAboveTheMaximumIsTooLarge) {
  SendCheck c;
  const Status st = c.check("alpha", "inbox", "", kMax + 1, kMax);
  EXPECT_EQ(st.code(), Errc::too_large);
  EXPECT_NE(st.message().find("1001 bytes exceeds the maximum of 1000"), std::string::npos)
      << st.toString();
}

TEST(SendCheckTest, CheckNameNamesTheKind) {
  EXPECT_TRUE(checkName("service", "orders").ok());
  const Status st = checkName("service", "a b");
  EXPECT_EQ(st.code(), Errc::bad_request);
  EXPECT_NE(st.message().find("invalid service name 'a b'"), std::string::npos) << st.toString();
}

TEST(HeldDestinationsTest, ADestinationIsHeldUntilItsResume) {
  HeldDestinations h;
  EXPECT_FALSE(h.isHeld("beta", "inbox"));
  h.set("beta", "inbox", true);
  h.set("beta", "inbox", true);  // a repeated HOLD
  EXPECT_TRUE(h.isHeld("beta", "inbox"));
  EXPECT_FALSE(h.isHeld("beta", "audit")) << "other services go on";
  EXPECT_FALSE(h.isHeld("gamma", "inbox")) << "other nodes go on";
  h.set("gamma", "inbox", true);
  h.set("beta", "inbox", false);
  EXPECT_FALSE(h.isHeld("beta", "inbox"));
  EXPECT_TRUE(h.isHeld("gamma", "inbox"));
  h.set("beta", "inbox", false);  // a RESUME of what is not held changes nothing
  h.set("gamma", "inbox", false);
  EXPECT_TRUE(h.empty());
}

}  // namespace
}  // namespace rdmamsg::client
