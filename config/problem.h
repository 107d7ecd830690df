// What the configuration loader returns: the Config, or every problem found, each
// with the file, line and column it was found at. No exception escapes the loader.
#pragma once

#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "config/config.h"

namespace rdmamsg::config {

struct ConfigProblem {
  std::string file;
  int line = 0;    // 1-based; 0 when the problem has no position (e.g. file not found)
  int column = 0;  // 1-based; 0 when unknown
  std::string message;

  // "file:line:column: message", dropping the parts that are 0.
  std::string toString() const;

  bool operator==(const ConfigProblem&) const = default;
};

class LoadResult {
 public:
  explicit LoadResult(Config config) : outcome_(std::move(config)) {}
  explicit LoadResult(std::vector<ConfigProblem> problems) : outcome_(std::move(problems)) {}

  bool ok() const { return std::holds_alternative<Config>(outcome_); }
  explicit operator bool() const { return ok(); }

  // Precondition: ok(). Aborts otherwise.
  const Config& config() const;
  // Empty when ok(); otherwise sorted by position (problems without one first).
  const std::vector<ConfigProblem>& problems() const;

 private:
  std::variant<Config, std::vector<ConfigProblem>> outcome_;
};

}  // namespace rdmamsg::config
