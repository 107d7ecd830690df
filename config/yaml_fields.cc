// FieldMap and ProblemSink: the generic half of the loader.
#include "config/yaml_fields.h"

#include <algorithm>
#include <tuple>

namespace rdmamsg::config::detail {
namespace {

// Levenshtein distance, for suggesting the key a typo was meant to be.
std::size_t editDistance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string unknownKeyMessage(const std::string& key, std::span<const std::string_view> allowed) {
  std::string message = "unknown key '" + key + "'";
  std::string_view best;
  std::size_t bestDistance = 3;  // suggest only close matches
  std::string list;
  for (std::string_view candidate : allowed) {
    const std::size_t distance = editDistance(key, candidate);
    if (distance < bestDistance) {
      bestDistance = distance;
      best = candidate;
    }
    list += (list.empty() ? "" : ", ") + std::string(candidate);
  }
  if (!best.empty()) message += ", did you mean '" + std::string(best) + "'?";
  return message + " (allowed: " + list + ")";
}

}  // namespace

void ProblemSink::add(const YAML::Mark& mark, std::string message) {
  if (mark.line < 0) return addUnpositioned(std::move(message));
  problems_.push_back({file_, mark.line + 1, mark.column + 1, std::move(message)});
}

void ProblemSink::addUnpositioned(std::string message) {
  problems_.push_back({file_, 0, 0, std::move(message)});
}

std::vector<ConfigProblem> ProblemSink::take() {
  std::stable_sort(problems_.begin(), problems_.end(), [](const auto& a, const auto& b) {
    return std::tie(a.line, a.column) < std::tie(b.line, b.column);
  });
  return std::move(problems_);
}

std::string describeNodeType(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Undefined:
      return "nothing";
    case YAML::NodeType::Null:
      return "an empty value";
    case YAML::NodeType::Scalar:
      return "a single value";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
  }
  return "an unknown node";
}

FieldMap::FieldMap(const YAML::Node& map, std::string path,
                   std::span<const std::string_view> allowed, ProblemSink& sink)
    : path_(std::move(path)), mark_(map.Mark()), sink_(sink) {
  for (const auto& entry : map)
    addField(entry.first, entry.second, allowed);
}

void FieldMap::addField(const YAML::Node& key, const YAML::Node& value,
                        std::span<const std::string_view> allowed) {
  const std::string where = path_.empty() ? "" : path_ + ": ";
  if (!key.IsScalar()) {
    sink_.add(key.Mark(), where + "keys must be plain names, not " + describeNodeType(key));
    return;
  }
  const std::string& name = key.Scalar();
  if (const Field* previous = find(name)) {
    sink_.add(key.Mark(), where + "duplicate key '" + name + "' (first given at line " +
                              std::to_string(previous->key.Mark().line + 1) + ")");
    return;
  }
  if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
    sink_.add(key.Mark(), where + unknownKeyMessage(name, allowed));
    return;
  }
  fields_.push_back({name, key, value});
}

const FieldMap::Field* FieldMap::find(std::string_view key) const {
  for (const Field& field : fields_) {
    if (field.name == key) return &field;
  }
  return nullptr;
}

bool FieldMap::isNull(std::string_view key) const {
  const Field* field = find(key);
  return field != nullptr && field->value.IsNull();
}

YAML::Node FieldMap::value(std::string_view key) const {
  const Field* field = find(key);
  return field != nullptr ? field->value : YAML::Node(YAML::NodeType::Undefined);
}

YAML::Mark FieldMap::markOf(std::string_view key) const {
  const Field* field = find(key);
  if (field == nullptr) return mark_;
  return field->value.IsNull() ? field->key.Mark() : field->value.Mark();
}

std::string FieldMap::pathOf(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

std::optional<std::string> FieldMap::scalar(std::string_view key, bool required) const {
  const Field* field = find(key);
  if (field == nullptr) {
    if (required) report(key, "missing");
    return std::nullopt;
  }
  if (field->value.IsNull()) {
    report(key, "has no value");
    return std::nullopt;
  }
  if (!field->value.IsScalar()) {
    report(key, "expected a single value, got " + describeNodeType(field->value));
    return std::nullopt;
  }
  return field->value.Scalar();
}

void FieldMap::report(std::string_view key, const std::string& message) const {
  sink_.add(markOf(key), pathOf(key) + ": " + message);
  reported_.emplace_back(key);
}

bool FieldMap::reported(std::string_view key) const {
  return std::find(reported_.begin(), reported_.end(), key) != reported_.end();
}

}  // namespace rdmamsg::config::detail
