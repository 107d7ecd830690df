// Size and duration parsing: a whole number, then a unit from a small table.
#include "config/units.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <limits>

namespace rdmamsg::config {
namespace {

struct Unit {
  std::string_view name;
  std::uint64_t factor;
};

constexpr std::array<Unit, 8> kSizeUnits = {{{"", 1},
                                             {"b", 1},
                                             {"k", kKiB},
                                             {"kib", kKiB},
                                             {"m", kMiB},
                                             {"mib", kMiB},
                                             {"g", kGiB},
                                             {"gib", kGiB}}};

constexpr std::array<Unit, 4> kDurationUnits = {
    {{"ms", 1}, {"s", 1000}, {"m", 60 * 1000}, {"h", 60 * 60 * 1000}}};

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
    s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
    s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// A number and the (trimmed, lower-cased) unit text after it.
struct NumberAndUnit {
  std::uint64_t number = 0;
  std::string unit;
};

// Splits "64 KiB" into 64 and "kib"; `kind` names the value in messages.
Parsed<NumberAndUnit> splitNumber(std::string_view raw, std::string_view kind,
                                  std::string_view example) {
  const std::string_view text = trim(raw);
  const std::string quoted = "'" + std::string(raw) + "'";
  std::size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits])))
    ++digits;
  if (digits == 0) {
    return Parsed<NumberAndUnit>::fail(quoted + " is not a " + std::string(kind) +
                                       " (expected e.g. " + std::string(example) + ")");
  }
  if (digits < text.size() && (text[digits] == '.' || text[digits] == ',')) {
    return Parsed<NumberAndUnit>::fail(quoted + " is not a whole number; use a smaller unit");
  }
  NumberAndUnit out;
  for (std::size_t i = 0; i < digits; ++i) {
    const std::uint64_t digit = static_cast<std::uint64_t>(text[i] - '0');
    if (out.number > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) {
      return Parsed<NumberAndUnit>::fail(quoted + " is too large");
    }
    out.number = out.number * 10 + digit;
  }
  out.unit = lower(trim(text.substr(digits)));
  return Parsed<NumberAndUnit>::ok(std::move(out));
}

template <std::size_t N>
const Unit* findUnit(const std::array<Unit, N>& units, std::string_view name) {
  for (const Unit& unit : units) {
    if (unit.name == name) return &unit;
  }
  return nullptr;
}

}  // namespace

Parsed<std::uint64_t> parseSize(std::string_view text) {
  auto split = splitNumber(text, "size", "65536 or 64KiB");
  if (!split) return Parsed<std::uint64_t>::fail(split.error);
  const Unit* unit = findUnit(kSizeUnits, split.value->unit);
  if (unit == nullptr) {
    const bool decimal =
        split.value->unit == "kb" || split.value->unit == "mb" || split.value->unit == "gb";
    return Parsed<std::uint64_t>::fail(
        "'" + std::string(text) +
        "': " + (decimal ? "decimal units are ambiguous" : "unknown size unit") +
        " (use B, KiB, MiB or GiB; a bare number means bytes)");
  }
  if (split.value->number > std::numeric_limits<std::uint64_t>::max() / unit->factor) {
    return Parsed<std::uint64_t>::fail("'" + std::string(text) + "' is too large");
  }
  return Parsed<std::uint64_t>::ok(split.value->number * unit->factor);
}

Parsed<std::chrono::milliseconds> parseDuration(std::string_view text) {
  using Result = Parsed<std::chrono::milliseconds>;
  auto split = splitNumber(text, "duration", "500ms or 2s");
  if (!split) return Result::fail(split.error);
  if (split.value->unit.empty()) {
    return Result::fail("'" + std::string(text) + "' has no unit (write e.g. 500ms, 2s, 1m or 1h)");
  }
  const Unit* unit = findUnit(kDurationUnits, split.value->unit);
  if (unit == nullptr) {
    return Result::fail("'" + std::string(text) + "': unknown duration unit (use ms, s, m or h)");
  }
  const auto limit = static_cast<std::uint64_t>(kMaxParsedDuration.count());
  if (split.value->number > limit / unit->factor) {
    return Result::fail("'" + std::string(text) + "' is too long (at most " +
                        formatDuration(kMaxParsedDuration) + ")");
  }
  return Result::ok(
      std::chrono::milliseconds(static_cast<std::int64_t>(split.value->number * unit->factor)));
}

std::string formatSize(std::uint64_t bytes) {
  if (bytes != 0 && bytes % kGiB == 0) return std::to_string(bytes / kGiB) + "GiB";
  if (bytes != 0 && bytes % kMiB == 0) return std::to_string(bytes / kMiB) + "MiB";
  if (bytes != 0 && bytes % kKiB == 0) return std::to_string(bytes / kKiB) + "KiB";
  return std::to_string(bytes) + "B";
}

std::string formatDuration(std::chrono::milliseconds duration) {
  const std::int64_t ms = duration.count();
  if (ms != 0 && ms % 3'600'000 == 0) return std::to_string(ms / 3'600'000) + "h";
  if (ms != 0 && ms % 60'000 == 0) return std::to_string(ms / 60'000) + "m";
  if (ms != 0 && ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

Parsed<bool> parseBool(std::string_view text) {
  if (text == "true" || text == "True" || text == "TRUE") return Parsed<bool>::ok(true);
  if (text == "false" || text == "False" || text == "FALSE") return Parsed<bool>::ok(false);
  return Parsed<bool>::fail("'" + std::string(text) + "' is not true or false");
}

}  // namespace rdmamsg::config
