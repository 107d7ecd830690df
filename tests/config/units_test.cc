// Tests of size and duration parsing and formatting.
#include <gtest/gtest.h>

#include "config/units.h"

namespace rdmamsg::config {
namespace {

using std::chrono::milliseconds;

std::uint64_t parsedSize(std::string_view text) {
  auto parsed = parseSize(text);
  EXPECT_TRUE(parsed) << text << ": " << parsed.error;
  return parsed.value.value_or(0);
}

std::string sizeError(std::string_view text) {
  auto parsed = parseSize(text);
  EXPECT_FALSE(parsed) << text;
  return parsed.error;
}

milliseconds parsedDuration(std::string_view text) {
  auto parsed = parseDuration(text);
  EXPECT_TRUE(parsed) << text << ": " << parsed.error;
  return parsed.value.value_or(milliseconds(-1));
}

std::string durationError(std::string_view text) {
  auto parsed = parseDuration(text);
  EXPECT_FALSE(parsed) << text;
  return parsed.error;
}

TEST(SizeTest, PlainIntegersAreBytes) {
  EXPECT_EQ(parsedSize("65536"), 65536u);
  EXPECT_EQ(parsedSize("0"), 0u);
  EXPECT_EQ(parsedSize("18446744073709551615"), 18446744073709551615u);
}

TEST(SizeTest, BinaryUnitsAndShorthands) {
  EXPECT_EQ(parsedSize("64KiB"), 64u * 1024);
  EXPECT_EQ(parsedSize("1MiB"), 1024u * 1024);
  EXPECT_EQ(parsedSize("1GiB"), 1024u * 1024 * 1024);
  EXPECT_EQ(parsedSize("512B"), 512u);
  EXPECT_EQ(parsedSize("64K"), 64u * 1024);
  EXPECT_EQ(parsedSize("16M"), 16u * kMiB);
  EXPECT_EQ(parsedSize("2G"), 2u * kGiB);
}

TEST(SizeTest, UnitsAreCaseInsensitiveAndMayBeSpaced) {
  EXPECT_EQ(parsedSize("64kib"), 64u * kKiB);
  EXPECT_EQ(parsedSize("64 KiB"), 64u * kKiB);
  EXPECT_EQ(parsedSize("  1 mib "), kMiB);
}

TEST(SizeTest, DecimalUnitsAreRejectedAsAmbiguous) {
  EXPECT_NE(sizeError("64KB").find("ambiguous"), std::string::npos);
  EXPECT_NE(sizeError("1MB").find("ambiguous"), std::string::npos);
  EXPECT_NE(sizeError("1gb").find("ambiguous"), std::string::npos);
}

TEST(SizeTest, RejectsMalformedValues) {
  EXPECT_NE(sizeError("").find("not a size"), std::string::npos);
  EXPECT_NE(sizeError("-1").find("not a size"), std::string::npos);
  EXPECT_NE(sizeError("KiB").find("not a size"), std::string::npos);
  EXPECT_NE(sizeError("1.5MiB").find("whole number"), std::string::npos);
  EXPECT_NE(sizeError("64 pages").find("unknown size unit"), std::string::npos);
  EXPECT_NE(sizeError("1TiB").find("unknown size unit"), std::string::npos);
  EXPECT_NE(sizeError("0x100").find("unknown size unit"), std::string::npos);
}

TEST(SizeTest, RejectsOverflow) {
  EXPECT_NE(sizeError("18446744073709551616").find("too large"), std::string::npos);
  EXPECT_NE(sizeError("17179869184GiB").find("too large"), std::string::npos);
}

TEST(SizeTest, FormatsInTheLargestExactUnit) {
  EXPECT_EQ(formatSize(65536), "64KiB");
  EXPECT_EQ(formatSize(16 * kMiB), "16MiB");
  EXPECT_EQ(formatSize(kGiB), "1GiB");
  EXPECT_EQ(formatSize(1000), "1000B");
  EXPECT_EQ(formatSize(0), "0B");
  EXPECT_EQ(formatSize(kMiB + kKiB), "1025KiB");
  for (std::uint64_t bytes : {std::uint64_t{1}, std::uint64_t{1536}, 3 * kGiB, kMiB - 1}) {
    EXPECT_EQ(parsedSize(formatSize(bytes)), bytes);
  }
}

TEST(DurationTest, AcceptsEachUnit) {
  EXPECT_EQ(parsedDuration("500ms"), milliseconds(500));
  EXPECT_EQ(parsedDuration("2s"), milliseconds(2000));
  EXPECT_EQ(parsedDuration("1m"), milliseconds(60'000));
  EXPECT_EQ(parsedDuration("1h"), milliseconds(3'600'000));
  EXPECT_EQ(parsedDuration("0ms"), milliseconds(0));
  EXPECT_EQ(parsedDuration(" 250 MS "), milliseconds(250));
}

TEST(DurationTest, UnitIsMandatory) {
  EXPECT_NE(durationError("500").find("has no unit"), std::string::npos);
}

TEST(DurationTest, RejectsMalformedValues) {
  EXPECT_NE(durationError("").find("not a duration"), std::string::npos);
  EXPECT_NE(durationError("-1s").find("not a duration"), std::string::npos);
  EXPECT_NE(durationError("1.5s").find("whole number"), std::string::npos);
  EXPECT_NE(durationError("2d").find("unknown duration unit"), std::string::npos);
  EXPECT_NE(durationError("100us").find("unknown duration unit"), std::string::npos);
  EXPECT_NE(durationError("1s500ms").find("unknown duration unit"), std::string::npos);
}

TEST(DurationTest, RejectsHugeValuesWithoutOverflow) {
  EXPECT_NE(durationError("8761h").find("too long"), std::string::npos);
  EXPECT_NE(durationError("99999999999999999999ms").find("too large"), std::string::npos);
  EXPECT_NE(durationError("18446744073709551615h").find("too long"), std::string::npos);
  EXPECT_EQ(parsedDuration("8760h"), kMaxParsedDuration);
}

TEST(DurationTest, FormatsInTheLargestExactUnit) {
  EXPECT_EQ(formatDuration(milliseconds(1500)), "1500ms");
  EXPECT_EQ(formatDuration(milliseconds(2000)), "2s");
  EXPECT_EQ(formatDuration(milliseconds(120'000)), "2m");
  EXPECT_EQ(formatDuration(milliseconds(7'200'000)), "2h");
  EXPECT_EQ(formatDuration(milliseconds(0)), "0ms");
  EXPECT_EQ(parsedDuration(formatDuration(milliseconds(90'000))), milliseconds(90'000));
}

}  // namespace
}  // namespace rdmamsg::config
