// Tests of validation: every problem is reported, at the right line and column, with
// a message that says what is wrong and what is allowed.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "config/loader.h"
#include "config_test_util.h"

namespace rdmamsg::config {
namespace {

using test::kMinimal;
using test::load;
using test::onlyProblem;
using test::problemStrings;

std::string withKey(const std::string& line) {
  return std::string(kMinimal) + line + "\n";
}

TEST(ProblemsTest, ToStringOmitsMissingPosition) {
  EXPECT_EQ((ConfigProblem{"f.yaml", 7, 5, "m"}.toString()), "f.yaml:7:5: m");
  EXPECT_EQ((ConfigProblem{"f.yaml", 7, 0, "m"}.toString()), "f.yaml:7: m");
  EXPECT_EQ((ConfigProblem{"f.yaml", 0, 0, "m"}.toString()), "f.yaml: m");
}

TEST(ProblemsTest, PortOutOfRangeNamesPeerLineAndColumn) {
  const LoadResult result = loadConfigFromString(
      "# mesh\n"
      "node: alpha\n"
      "listen: 127.0.0.1:7471\n"
      "peers:\n"
      "  - name: beta\n"
      "    address: 127.0.0.2:7471\n"
      "  - name: gamma\n"
      "    address: 127.0.0.3:99999\n",
      "/etc/rdmamsg/rdmamsgd.yaml");
  EXPECT_EQ(problemStrings(result),
            std::vector<std::string>{"/etc/rdmamsg/rdmamsgd.yaml:8:14: peers[1].address: port "
                                     "99999 out of range 1..65535"});
}

TEST(ProblemsTest, UnknownKeySuggestsTheIntendedOneAndListsAllowed) {
  const ConfigProblem p = onlyProblem(load(withKey("bufer_size: 1MiB")));
  EXPECT_EQ(p.line, 6);
  EXPECT_EQ(p.column, 1);
  EXPECT_NE(p.message.find("unknown key 'bufer_size', did you mean 'buffer_size'?"),
            std::string::npos)
      << p.message;
  EXPECT_NE(p.message.find("(allowed: node, listen, socket, socket_mode"), std::string::npos);
  EXPECT_NE(p.message.find("log_level, metrics_listen)"), std::string::npos);

  const ConfigProblem far = onlyProblem(load(withKey("colour: blue")));
  EXPECT_EQ(far.message.find("did you mean"), std::string::npos);
}

TEST(ProblemsTest, UnknownKeyInPeerEntry) {
  const ConfigProblem p = onlyProblem(
      load("node: alpha\nlisten: 127.0.0.1:1\npeers:\n  - name: b\n    address: 127.0.0.2:1\n"
           "    adress: 127.0.0.2:1\n"));
  EXPECT_EQ(p.toString(),
            "test.yaml:6:5: peers[0]: unknown key 'adress', did you mean 'address'? (allowed: "
            "name, address, verify_address)");
}

TEST(ProblemsTest, DuplicateKeyPointsAtTheSecond) {
  const ConfigProblem p = onlyProblem(load(withKey("node: gamma")));
  EXPECT_EQ(p.line, 6);
  EXPECT_EQ(p.message, "duplicate key 'node' (first given at line 1)");
}

TEST(ProblemsTest, WrongTypes) {
  EXPECT_EQ(onlyProblem(load(withKey("buffer_size: [1, 2]"))).message,
            "buffer_size: expected a single value, got a list");
  EXPECT_EQ(onlyProblem(load(withKey("log_level: {a: b}"))).message,
            "log_level: expected a single value, got a mapping");
  EXPECT_EQ(onlyProblem(load("node: alpha\nlisten: 127.0.0.1:1\npeers: beta\n")).message,
            "peers: expected a list of {name, address}, got a single value");
  EXPECT_EQ(onlyProblem(load("node: alpha\nlisten: 127.0.0.1:1\npeers:\n  - beta\n")).message,
            "peers[0]: expected a mapping with name and address, got a single value");
  EXPECT_EQ(onlyProblem(load("- node: alpha\n")).message,
            "expected a mapping of settings (node: ..., peers: ...), got a list");
  EXPECT_EQ(onlyProblem(load("just text\n")).message,
            "expected a mapping of settings (node: ..., peers: ...), got a single value");
}

TEST(ProblemsTest, EmptyValueIsReportedAtItsKey) {
  const ConfigProblem p = onlyProblem(load(withKey("heartbeat_interval:\nlog_level: info")));
  EXPECT_EQ(p.toString(), "test.yaml:6:1: heartbeat_interval: has no value");
}

TEST(ProblemsTest, MissingNodeAndPeers) {
  const LoadResult result = load("listen: 127.0.0.1:7471\n");
  EXPECT_EQ(problemStrings(result),
            (std::vector<std::string>{
                "test.yaml:1:1: node: missing",
                "test.yaml:1:1: peers: missing (list the other daemons; an empty list is [])"}));
}

TEST(ProblemsTest, InvalidNames) {
  EXPECT_EQ(onlyProblem(load("node: al pha\nlisten: 127.0.0.1:1\npeers: []\n")).toString(),
            "test.yaml:1:7: node: invalid node name 'al pha' (1..63 characters of A-Z a-z 0-9 . "
            "_ -)");
  const std::string longName(64, 'x');
  const ConfigProblem p =
      onlyProblem(load("node: alpha\nlisten: 127.0.0.1:1\npeers:\n  - name: " + longName +
                       "\n    address: 127.0.0.2:1\n"));
  EXPECT_EQ(p.line, 4);
  EXPECT_NE(p.message.find("peers[0].name: invalid node name"), std::string::npos);
}

TEST(ProblemsTest, PeerEntryNeedsNameAndAddress) {
  const LoadResult result =
      load("node: alpha\nlisten: 127.0.0.1:1\npeers:\n  - name: beta\n  - address: 127.0.0.3:1\n");
  EXPECT_EQ(problemStrings(result),
            (std::vector<std::string>{"test.yaml:4:5: peers[0].address: missing",
                                      "test.yaml:5:5: peers[1].name: missing"}));
}

TEST(ProblemsTest, SizeAndCountBounds) {
  EXPECT_EQ(onlyProblem(load(withKey("max_message_size: 0"))).message,
            "max_message_size: 0B out of range 1B..1GiB");
  EXPECT_EQ(onlyProblem(load(withKey("max_message_size: 2GiB"))).message,
            "max_message_size: 2GiB out of range 1B..1GiB");
  EXPECT_TRUE(load(withKey("max_message_size: 1GiB")).ok());
  EXPECT_TRUE(load(withKey("max_message_size: 1")).ok());
  EXPECT_EQ(onlyProblem(load(withKey("buffer_size: 512"))).message,
            "buffer_size: 512B out of range 1KiB..64MiB");
  EXPECT_EQ(onlyProblem(load(withKey("buffer_count: 1"))).message,
            "buffer_count: 1 out of range 2..16384");
  EXPECT_EQ(onlyProblem(load(withKey("buffer_count: 64KiB"))).message,
            "buffer_count: '64KiB' is not a whole number");
  EXPECT_EQ(onlyProblem(load(withKey("buffer_count: -3"))).message,
            "buffer_count: '-3' is not a whole number");
  EXPECT_EQ(onlyProblem(load(withKey("send_queue_limit: 1.5MiB"))).message,
            "send_queue_limit: '1.5MiB' is not a whole number; use a smaller unit");
}

TEST(ProblemsTest, DurationBounds) {
  EXPECT_EQ(onlyProblem(load(withKey("connect_timeout: 0s"))).message,
            "connect_timeout: 0ms out of range 1ms..24h");
  EXPECT_EQ(onlyProblem(load(withKey("message_timeout: 25h"))).message,
            "message_timeout: 25h out of range 1ms..24h");
  EXPECT_EQ(onlyProblem(load(withKey("heartbeat_interval: 500"))).message,
            "heartbeat_interval: '500' has no unit (write e.g. 500ms, 2s, 1m or 1h)");
}

TEST(ProblemsTest, HeartbeatTimeoutMustExceedInterval) {
  EXPECT_EQ(onlyProblem(load(withKey("heartbeat_interval: 2s\nheartbeat_timeout: 2s"))).toString(),
            "test.yaml:7:20: heartbeat_timeout: 2s must be greater than heartbeat_interval (2s)");
  // Only the interval is given: the problem points at it and names the default.
  EXPECT_EQ(onlyProblem(load(withKey("heartbeat_interval: 10s"))).toString(),
            "test.yaml:6:21: heartbeat_interval: 10s must be less than heartbeat_timeout (5s, the "
            "default)");
  EXPECT_TRUE(load(withKey("heartbeat_interval: 10s\nheartbeat_timeout: 11s")).ok());
}

TEST(ProblemsTest, OrderIsNotCheckedAgainstAnInvalidValue) {
  EXPECT_EQ(onlyProblem(load(withKey("heartbeat_interval: often\nheartbeat_timeout: 1s"))).message,
            "heartbeat_interval: 'often' is not a duration (expected e.g. 500ms or 2s)");
}

TEST(ProblemsTest, BackoffMaxMustBeAtLeastMin) {
  EXPECT_EQ(onlyProblem(load(withKey("reconnect_backoff_max: 50ms"))).message,
            "reconnect_backoff_max: 50ms must be at least reconnect_backoff_min (100ms, the "
            "default)");
  EXPECT_EQ(onlyProblem(load(withKey("reconnect_backoff_min: 1m"))).message,
            "reconnect_backoff_min: 1m must be at most reconnect_backoff_max (10s, the default)");
}

TEST(ProblemsTest, SyntaxErrorHasItsLine) {
  const ConfigProblem p = onlyProblem(load("node: alpha\npeers: [beta\nlisten: x\n"));
  EXPECT_EQ(p.line, 3);
  EXPECT_NE(p.message.find("YAML syntax error: "), std::string::npos) << p.message;
}

TEST(ProblemsTest, OnlyOneDocument) {
  const ConfigProblem p = onlyProblem(load(std::string(kMinimal) + "---\nnode: beta\n"));
  EXPECT_EQ(p.line, 7);
  EXPECT_NE(p.message.find("only one YAML document"), std::string::npos);
}

TEST(ProblemsTest, EveryProblemIsReportedInFileOrder) {
  const LoadResult result = load(
      "node: -bad name-\n"            // 1
      "listen: 127.0.0.1\n"           // 2
      "peers:\n"                      // 3
      "  - name: beta\n"              // 4
      "    address: 10.0.0.2:0\n"     // 5
      "  - name: beta\n"              // 6
      "    address: 10.0.0.3:7471\n"  // 7
      "buffer_size: lots\n"           // 8
      "heartbeat_timeout: 1s\n"       // 9
      "log_levle: info\n"             // 10
      "message_timeout: 1d\n");       // 11
  const std::vector<std::string> problems = problemStrings(result);
  ASSERT_EQ(problems.size(), 8u) << testing::PrintToString(problems);
  const int lines[] = {1, 2, 5, 6, 8, 9, 10, 11};
  for (std::size_t i = 0; i < problems.size(); ++i) {
    EXPECT_EQ(result.problems()[i].line, lines[i]) << problems[i];
  }
  EXPECT_NE(problems[3].find("duplicate peer name 'beta' (also at line 4)"), std::string::npos);
  EXPECT_NE(problems[5].find("heartbeat_timeout: 1s must be greater than heartbeat_interval"),
            std::string::npos);
}

TEST(ProblemsTest, HostileInputNeverThrows) {
  const std::string deep(5000, '[');
  const std::string inputs[] = {deep,
                                std::string("\0\xff\xfe", 3),
                                "{",
                                "node: *undefined_alias\n",
                                "? [complex, key]\n: value\n",
                                "node: &a alpha\nlisten: *a\npeers: []\n",
                                "peers: [" + std::string(200, '{') + "\n",
                                "node: !!binary aGVsbG8=\npeers: {}\n"};
  for (const std::string& input : inputs) {
    LoadResult result = load("");
    EXPECT_NO_THROW(result = load(input)) << input.substr(0, 40);
    EXPECT_FALSE(result.ok()) << input.substr(0, 40);
    EXPECT_FALSE(result.problems().empty());
  }
}

// Loads `yaml` on a thread of its own and waits at most `limit` for it, so that a
// loader that never returns fails the test instead of hanging it (the thread is
// left behind; the test's process ends with the test).
std::optional<LoadResult> loadWithin(const std::string& yaml, std::chrono::seconds limit) {
  auto promise = std::make_shared<std::promise<LoadResult>>();
  std::future<LoadResult> result = promise->get_future();
  std::thread([yaml, promise] { promise->set_value(load(yaml)); }).detach();
  if (result.wait_for(limit) != std::future_status::ready) return std::nullopt;
  return result.get();
}

// yaml-cpp 0.7's LoadAll never returns, allocating all the while, when a document
// would start at a ',' (jbeder/yaml-cpp#1040): a stray comma must be a syntax
// error at its line, not a daemon that hangs at start or on reload.
TEST(ProblemsTest, StrayCommaIsASyntaxError) {
  const struct {
    const char* yaml;
    int line;
  } cases[] = {
      {",\n", 1},
      {", node: alpha\n", 1},
      {"[alpha]\n,\n", 2},
      {"---\n,\n", 2},
      {"node: alpha\nlisten: 127.0.0.1:7471\npeers: []\n...\n,\n", 5},
  };
  for (const auto& c : cases) {
    const std::optional<LoadResult> result = loadWithin(c.yaml, std::chrono::seconds(5));
    ASSERT_TRUE(result.has_value()) << "the loader did not return within 5 s for: " << c.yaml;
    const ConfigProblem p = onlyProblem(*result);
    EXPECT_EQ(p.line, c.line) << c.yaml;
    EXPECT_EQ(p.column, 1) << c.yaml;
    EXPECT_EQ(p.message, "YAML syntax error: unexpected ','") << c.yaml;
  }
}

TEST(ProblemsTest, DeepNestingIsReported) {
  EXPECT_EQ(onlyProblem(load(std::string(5000, '['))).message, "YAML nesting is too deep");
}

TEST(ProblemsTest, ComplexKeyIsReported) {
  const ConfigProblem p = onlyProblem(load(std::string(kMinimal) + "? [a, b]\n: c\n"));
  EXPECT_EQ(p.message, "keys must be plain names, not a list");
}

TEST(ProblemsTest, ResultWithoutConfigHasNoProblemsWhenOk) {
  const LoadResult result = load(kMinimal);
  ASSERT_TRUE(result);
  EXPECT_TRUE(result.problems().empty());
}

}  // namespace
}  // namespace rdmamsg::config
