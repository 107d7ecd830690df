// Status and Result: codes, names, formatting.
#include "common/status.h"

#include <gtest/gtest.h>

#include <set>

namespace rdmamsg {
namespace {

TEST(StatusTest, DefaultIsOk) {
  Status st;
  EXPECT_TRUE(st.ok());
  EXPECT_EQ(st.code(), Errc::ok);
  EXPECT_EQ(st.toString(), "ok");
}

TEST(StatusTest, ToStringNamesCodeAndMessage) {
  Status st(Errc::unknown_service, "no listener for service 'b' on node 'n1'");
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.toString(), "unknown_service: no listener for service 'b' on node 'n1'");
  EXPECT_EQ(Status(Errc::timeout, "").toString(), "timeout");
}

TEST(StatusTest, EveryCodeHasADistinctName) {
  std::set<std::string_view> names;
  for (uint16_t c = 0; c <= kMaxErrc; ++c) {
    auto name = toString(static_cast<Errc>(c));
    EXPECT_NE(name, "invalid_errc") << c;
    names.insert(name);
  }
  EXPECT_EQ(names.size(), kMaxErrc + 1u);
}

TEST(ResultTest, HoldsValueOrStatus) {
  Result<int> good(42);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 42);
  Result<int> bad(Status(Errc::busy, "later"));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Errc::busy);
}

TEST(ResultTest, OkStatusIsNotAValue) {
  Result<int> r{Status()};
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(r.status().ok());
}

}  // namespace
}  // namespace rdmamsg
