// Helpers shared by the configuration tests: loading YAML text, listing problems as
// strings, and temporary files that remove themselves.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/loader.h"

namespace rdmamsg::config::test {

inline LoadResult load(std::string_view yaml, std::optional<std::string> node = std::nullopt) {
  return loadConfigFromString(yaml, "test.yaml", std::move(node));
}

// Problems as "file:line:column: message" strings.
inline std::vector<std::string> problemStrings(const LoadResult& result) {
  std::vector<std::string> out;
  for (const ConfigProblem& problem : result.problems())
    out.push_back(problem.toString());
  return out;
}

// Asserts the load failed and returns the single problem it found.
inline ConfigProblem onlyProblem(const LoadResult& result) {
  EXPECT_FALSE(result.ok());
  EXPECT_EQ(result.problems().size(), 1u) << ::testing::PrintToString(problemStrings(result));
  return result.problems().empty() ? ConfigProblem{} : result.problems().front();
}

// A private temporary directory, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "rdmamsg-config-XXXXXX");
    if (mkdtemp(pattern.data()) == nullptr) std::abort();
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

  // Writes `text` to `name` inside the directory; returns the full path.
  std::string write(const std::string& name, std::string_view text) const {
    const std::filesystem::path file = path_ / name;
    std::ofstream(file, std::ios::binary) << text;
    return file.string();
  }

 private:
  std::filesystem::path path_;
};

// A valid configuration with no tuning keys.
inline constexpr std::string_view kMinimal =
    "node: alpha\n"
    "listen: 127.0.0.1:7471\n"
    "peers:\n"
    "  - name: beta\n"
    "    address: 127.0.0.2:7471\n";

}  // namespace rdmamsg::config::test
