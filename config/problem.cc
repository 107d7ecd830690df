// ConfigProblem formatting and LoadResult accessors.
#include "config/problem.h"

#include <cstdio>
#include <cstdlib>

namespace rdmamsg::config {

std::string ConfigProblem::toString() const {
  std::string out = file;
  if (line > 0) {
    out += ":" + std::to_string(line);
    if (column > 0) out += ":" + std::to_string(column);
  }
  return out + ": " + message;
}

const Config& LoadResult::config() const {
  if (const Config* config = std::get_if<Config>(&outcome_)) return *config;
  std::fputs("rdmamsg::config::LoadResult::config() called on a failed load\n", stderr);
  std::abort();
}

const std::vector<ConfigProblem>& LoadResult::problems() const {
  static const std::vector<ConfigProblem> kNone;
  if (const auto* problems = std::get_if<std::vector<ConfigProblem>>(&outcome_)) return *problems;
  return kNone;
}

}  // namespace rdmamsg::config
