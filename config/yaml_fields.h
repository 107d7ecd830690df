// Internal to the loader: reads the keys of one YAML mapping into typed values and
// records every problem with its position, so that one pass reports all of them.
// Checks that every mapping gets: keys are plain scalars, none is repeated, none is
// unknown (with a "did you mean" for typos).
#pragma once

#include <yaml-cpp/yaml.h>

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "config/parsed.h"
#include "config/problem.h"

namespace rdmamsg::config::detail {

// Collects problems for one file.
class ProblemSink {
 public:
  explicit ProblemSink(std::string file) : file_(std::move(file)) {}

  void add(const YAML::Mark& mark, std::string message);
  void addUnpositioned(std::string message);
  bool empty() const { return problems_.empty(); }

  // The problems in file order (those without a position first).
  std::vector<ConfigProblem> take();

 private:
  std::string file_;
  std::vector<ConfigProblem> problems_;
};

// "a sequence", "a mapping", "a value", "nothing" — for "expected X, got Y" messages.
std::string describeNodeType(const YAML::Node& node);

class FieldMap {
 public:
  // `path` names the mapping in messages ("" for the top level, "peers[1]" for a peer).
  // Precondition: map.IsMap().
  FieldMap(const YAML::Node& map, std::string path, std::span<const std::string_view> allowed,
           ProblemSink& sink);

  bool has(std::string_view key) const { return find(key) != nullptr; }
  bool isNull(std::string_view key) const;

  // The value node of `key`; an undefined node when absent.
  YAML::Node value(std::string_view key) const;

  // Where a message about `key` points: its value, or the key when the value is empty
  // (yaml-cpp puts an empty value at the next token). The mapping itself when absent.
  YAML::Mark markOf(std::string_view key) const;
  YAML::Mark mark() const { return mark_; }

  // The mapping's own path ("peers[1]"; "" at the top level).
  const std::string& path() const { return path_; }
  // "peers[1].address", or "node" at the top level.
  std::string pathOf(std::string_view key) const;

  // The text of a scalar `key`; nullopt (after reporting) when absent and required, or
  // when it is empty, a sequence or a mapping. Absent and optional: nullopt, no report.
  std::optional<std::string> scalar(std::string_view key, bool required = false) const;

  // scalar(), then `parse` (returning Parsed<T>); failures are reported at the value.
  template <typename Parse>
  auto parsed(std::string_view key, Parse parse, bool required = false) const
      -> decltype(parse(std::string_view{}).value) {
    const std::optional<std::string> text = scalar(key, required);
    if (!text) return std::nullopt;
    auto result = parse(std::string_view(*text));
    if (!result) report(key, result.error);
    return result.value;
  }

  // Reports "<path of key>: message" at markOf(key).
  void report(std::string_view key, const std::string& message) const;
  // True when a problem was reported about `key` (its value is then unknown).
  bool reported(std::string_view key) const;
  ProblemSink& sink() const { return sink_; }

 private:
  struct Field {
    std::string name;
    YAML::Node key;
    YAML::Node value;
  };

  const Field* find(std::string_view key) const;
  void addField(const YAML::Node& key, const YAML::Node& value,
                std::span<const std::string_view> allowed);

  std::string path_;
  YAML::Mark mark_;
  std::vector<Field> fields_;
  mutable std::vector<std::string> reported_;
  ProblemSink& sink_;
};

}  // namespace rdmamsg::config::detail
