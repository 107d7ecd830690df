// Parsing and printing of the two unit-carrying value kinds in the configuration:
// sizes ("65536", "64KiB", "1 MiB") and durations ("500ms", "2s", "1m").
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "config/parsed.h"

namespace rdmamsg::config {

inline constexpr std::uint64_t kKiB = 1024;
inline constexpr std::uint64_t kMiB = 1024 * kKiB;
inline constexpr std::uint64_t kGiB = 1024 * kMiB;

// A whole number of bytes, optionally followed (spaces allowed) by a binary unit:
// B, KiB, MiB, GiB, or the shorthands K, M, G (also 1024-based). Units are
// case-insensitive. Decimal units (KB, MB, GB) are rejected as ambiguous, as are
// fractions, signs and values that do not fit in 64 bits.
Parsed<std::uint64_t> parseSize(std::string_view text);

// A whole number followed (spaces allowed) by a unit: ms, s, m (minutes) or h.
// A bare number is rejected: the unit is mandatory. Resolution is 1 ms; values
// above kMaxParsedDuration are rejected.
Parsed<std::chrono::milliseconds> parseDuration(std::string_view text);

inline constexpr std::chrono::milliseconds kMaxParsedDuration = std::chrono::hours(24 * 365);

// `true` or `false` (YAML's spellings True/TRUE/False/FALSE too).
Parsed<bool> parseBool(std::string_view text);

// The shortest exact form in the largest unit: 65536 -> "64KiB", 1000 -> "1000B".
std::string formatSize(std::uint64_t bytes);

// The shortest exact form: 1500ms -> "1500ms", 2000ms -> "2s", 120000ms -> "2m".
std::string formatDuration(std::chrono::milliseconds duration);

}  // namespace rdmamsg::config
