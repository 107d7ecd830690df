// rdmamsg::config::Parsed<T>: the outcome of parsing one value from text — the
// value, or a sentence saying why the text is not one (used in problem messages).
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace rdmamsg::config {

template <typename T>
struct Parsed {
  std::optional<T> value;
  std::string error;  // empty when value is set

  static Parsed ok(T v) { return Parsed{std::move(v), {}}; }
  static Parsed fail(std::string why) { return Parsed{std::nullopt, std::move(why)}; }
  explicit operator bool() const { return value.has_value(); }
};

}  // namespace rdmamsg::config
