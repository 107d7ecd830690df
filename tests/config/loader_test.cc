// Tests of loading valid configurations: values, defaults, every tuning key, and
// reading from files.
#include <gtest/gtest.h>

#include "config/loader.h"
#include "config_test_util.h"

namespace rdmamsg::config {
namespace {

using std::chrono::milliseconds;
using test::kMinimal;
using test::load;
using test::onlyProblem;

TEST(LoaderTest, MinimalFileGetsEveryDefault) {
  const LoadResult result = load(kMinimal);
  ASSERT_TRUE(result.ok()) << testing::PrintToString(test::problemStrings(result));
  const Config& c = result.config();
  EXPECT_EQ(c.sourceFile, "test.yaml");
  EXPECT_EQ(c.node, "alpha");
  EXPECT_EQ(c.listen, (Address{"127.0.0.1", 7471}));
  ASSERT_EQ(c.peers.size(), 1u);
  EXPECT_EQ(c.peers[0], (Peer{"beta", Address{"127.0.0.2", 7471}}));

  EXPECT_EQ(c.local.socket, "/run/rdmamsg/rdmamsgd.sock");
  EXPECT_EQ(c.local.socketMode, 0660u);
  EXPECT_FALSE(c.local.socketGroup);
  EXPECT_EQ(c.buffers.bufferSize, 256u * 1024);
  EXPECT_EQ(c.buffers.bufferCount, 16u);
  EXPECT_EQ(c.buffers.grantedCredits(), 15u);
  EXPECT_EQ(c.buffers.maxMessageSize, 16u * 1024 * 1024);
  EXPECT_EQ(c.buffers.sendQueueLimit, 2u * 1024 * 1024);
  EXPECT_EQ(c.timers.heartbeatInterval, milliseconds(1000));
  EXPECT_EQ(c.timers.heartbeatTimeout, milliseconds(5000));
  EXPECT_EQ(c.timers.reconnectBackoffMin, milliseconds(100));
  EXPECT_EQ(c.timers.reconnectBackoffMax, milliseconds(10'000));
  EXPECT_EQ(c.timers.connectTimeout, milliseconds(5000));
  EXPECT_EQ(c.timers.messageTimeout, milliseconds(30'000));
  EXPECT_EQ(c.logLevel, LogLevel::kInfo);
}

TEST(LoaderTest, ReadsEveryTuningKey) {
  const std::string yaml = std::string(kMinimal) +
                           "socket: /tmp/r.sock\n"
                           "socket_mode: \"0600\"\n"
                           "socket_group: rdmamsg\n"
                           "buffer_size: 1MiB\n"
                           "buffer_count: 128\n"
                           "max_message_size: 1GiB\n"
                           "send_queue_limit: 65536\n"
                           "heartbeat_interval: 500ms\n"
                           "heartbeat_timeout: 2s\n"
                           "reconnect_backoff_min: 1s\n"
                           "reconnect_backoff_max: 1s\n"
                           "connect_timeout: 3s\n"
                           "message_timeout: 1m\n"
                           "log_level: debug\n";
  const LoadResult result = load(yaml);
  ASSERT_TRUE(result.ok()) << testing::PrintToString(test::problemStrings(result));
  const Config& c = result.config();
  EXPECT_EQ(c.local.socket, "/tmp/r.sock");
  EXPECT_EQ(c.local.socketMode, 0600u);
  EXPECT_EQ(c.local.socketGroup, "rdmamsg");
  EXPECT_EQ(c.buffers.bufferSize, kMiB);
  EXPECT_EQ(c.buffers.bufferCount, 128u);
  EXPECT_EQ(c.buffers.grantedCredits(), 127u);
  EXPECT_EQ(c.buffers.maxMessageSize, kGiB);
  EXPECT_EQ(c.buffers.sendQueueLimit, 65536u);
  EXPECT_EQ(c.timers.heartbeatInterval, milliseconds(500));
  EXPECT_EQ(c.timers.heartbeatTimeout, milliseconds(2000));
  EXPECT_EQ(c.timers.reconnectBackoffMin, milliseconds(1000));
  EXPECT_EQ(c.timers.reconnectBackoffMax, milliseconds(1000));
  EXPECT_EQ(c.timers.connectTimeout, milliseconds(3000));
  EXPECT_EQ(c.timers.messageTimeout, milliseconds(60'000));
  EXPECT_EQ(c.logLevel, LogLevel::kDebug);
}

TEST(LoaderTest, SocketModeAcceptsQuotedUnquotedAndThreeDigits) {
  for (const char* mode : {"\"0660\"", "0660", "660", "'0777'", "000"}) {
    const LoadResult result = load(std::string(kMinimal) + "socket_mode: " + mode + "\n");
    ASSERT_TRUE(result.ok()) << mode;
  }
  EXPECT_EQ(load(std::string(kMinimal) + "socket_mode: 640\n").config().local.socketMode, 0640u);
}

TEST(LoaderTest, SocketModeRejectsNonOctal) {
  for (const char* mode : {"0800", "rw-rw----", "1777", "66", "06600"}) {
    const ConfigProblem p =
        onlyProblem(load(std::string(kMinimal) + "socket_mode: " + mode + "\n"));
    EXPECT_NE(p.message.find("socket_mode: "), std::string::npos) << mode;
    EXPECT_NE(p.message.find("octal"), std::string::npos) << p.message;
  }
}

TEST(LoaderTest, EmptySocketGroupMeansUnset) {
  const LoadResult result = load(std::string(kMinimal) + "socket_group:\n");
  ASSERT_TRUE(result.ok());
  EXPECT_FALSE(result.config().local.socketGroup);
  EXPECT_EQ(load(std::string(kMinimal) + "socket_group: 998\n").config().local.socketGroup, "998");
}

TEST(LoaderTest, SocketPathMustBeAbsoluteAndFitSunPath) {
  EXPECT_NE(onlyProblem(load(std::string(kMinimal) + "socket: run/x.sock\n"))
                .message.find("socket: 'run/x.sock' is not an absolute path"),
            std::string::npos);
  const std::string longPath = "/" + std::string(107, 'x');
  EXPECT_NE(onlyProblem(load(std::string(kMinimal) + "socket: " + longPath + "\n"))
                .message.find("at most 107"),
            std::string::npos);
  EXPECT_TRUE(load(std::string(kMinimal) + "socket: /" + std::string(106, 'x') + "\n").ok());
}

TEST(LoaderTest, EveryLogLevel) {
  const std::pair<const char*, LogLevel> levels[] = {
      {"trace", LogLevel::kTrace}, {"debug", LogLevel::kDebug}, {"info", LogLevel::kInfo},
      {"warn", LogLevel::kWarn},   {"error", LogLevel::kError}, {"critical", LogLevel::kCritical},
      {"off", LogLevel::kOff}};
  for (const auto& [name, level] : levels) {
    const LoadResult result = load(std::string(kMinimal) + "log_level: " + name + "\n");
    ASSERT_TRUE(result.ok()) << name;
    EXPECT_EQ(result.config().logLevel, level);
    EXPECT_EQ(toString(level), name);
  }
  const ConfigProblem p = onlyProblem(load(std::string(kMinimal) + "log_level: verbose\n"));
  EXPECT_NE(p.message.find("trace|debug|info|warn|error|critical|off"), std::string::npos);
}

// tos: the ToS byte, 0..255; absent or ~: unset (the device's default).
TEST(LoaderTest, TosIsAByteOrUnset) {
  EXPECT_FALSE(load(kMinimal).config().tos);
  EXPECT_FALSE(load(std::string(kMinimal) + "tos: ~\n").config().tos);
  for (int tos : {0, 106, 255}) {
    const LoadResult result = load(std::string(kMinimal) + "tos: " + std::to_string(tos) + "\n");
    ASSERT_TRUE(result.ok()) << tos;
    EXPECT_EQ(result.config().tos, std::optional<std::uint8_t>(static_cast<std::uint8_t>(tos)));
    EXPECT_NE(describe(result.config()).find("tos=" + std::to_string(tos)), std::string::npos);
  }
  for (const char* bad : {"256", "-1", "0x6a", "af31"}) {
    const ConfigProblem p = onlyProblem(load(std::string(kMinimal) + "tos: " + bad + "\n"));
    EXPECT_NE(p.message.find("tos: "), std::string::npos) << p.message;
    EXPECT_GT(p.line, 1) << bad;
  }
  EXPECT_NE(onlyProblem(load(std::string(kMinimal) + "tos: 256\n")).message.find("0..255"),
            std::string::npos);
}

// rail_policy: active-standby (the default) or spread; spread keeps a
// connection per shared rail with each peer (Config::lanesWith).
TEST(LoaderTest, RailPolicyIsActiveStandbyOrSpread) {
  EXPECT_EQ(load(kMinimal).config().railPolicy, RailPolicy::kActiveStandby);
  const LoadResult spread = load(std::string(kMinimal) + "rail_policy: spread\n");
  ASSERT_TRUE(spread.ok());
  EXPECT_EQ(spread.config().railPolicy, RailPolicy::kSpread);
  EXPECT_NE(describe(spread.config()).find("rail_policy=spread"), std::string::npos);
  const ConfigProblem p = onlyProblem(load(std::string(kMinimal) + "rail_policy: stripe\n"));
  EXPECT_NE(p.message.find("'stripe' is not active-standby or spread"), std::string::npos)
      << p.message;
  EXPECT_GT(p.line, 1);
}

TEST(LoaderTest, SpreadKeepsALanePerRailSharedWithEachPeer) {
  Config c;
  c.listen = Address{"198.51.100.1", 7471};
  c.extraListen = {Address{"203.0.113.1", 7471}};
  c.peers.push_back({"two", {"198.51.100.2", 7471}, true});
  c.peers.back().extraRails = {Address{"203.0.113.2", 7471}};
  c.peers.push_back({"one", {"198.51.100.3", 7471}, true});
  EXPECT_EQ(c.laneCount(), 2u) << "active-standby: one connection per peer";
  c.railPolicy = RailPolicy::kSpread;
  EXPECT_EQ(c.lanesWith(c.peers[0]), 2u);
  EXPECT_EQ(c.lanesWith(c.peers[1]), 1u) << "one rail shared: one lane";
  EXPECT_EQ(c.laneCount(), 3u);
}

TEST(LoaderTest, LoadsFromFile) {
  test::TempDir dir;
  const std::string path = dir.write("rdmamsgd.yaml", kMinimal);
  const LoadResult result = loadConfig(path);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result.config().sourceFile, path);
  EXPECT_EQ(result.config().node, "alpha");
}

TEST(LoaderTest, MissingFileIsAClearProblem) {
  test::TempDir dir;
  const std::string path = (dir.path() / "absent.yaml").string();
  const ConfigProblem p = onlyProblem(loadConfig(path));
  EXPECT_EQ(p.toString(), path + ": cannot read configuration file: No such file or directory");
}

TEST(LoaderTest, DirectoryIsAClearProblem) {
  test::TempDir dir;
  const ConfigProblem p = onlyProblem(loadConfig(dir.path().string()));
  EXPECT_NE(p.message.find("is a directory"), std::string::npos);
}

TEST(LoaderTest, EmptyFileIsAClearProblem) {
  test::TempDir dir;
  for (const char* text : {"", "\n\n", "# only a comment\n", "~\n"}) {
    const std::string path = dir.write("empty.yaml", text);
    const ConfigProblem p = onlyProblem(loadConfig(path));
    EXPECT_EQ(p.file, path);
    EXPECT_NE(p.message.find("the configuration is empty"), std::string::npos) << p.message;
  }
}

TEST(LoaderTest, DescribeNamesEverySetting) {
  const LoadResult result = load(std::string(kMinimal) + "socket_group: rdmamsg\n");
  ASSERT_TRUE(result.ok());
  const std::string line = describe(result.config());
  EXPECT_EQ(line.find('\n'), std::string::npos);
  for (std::string_view key : kTopLevelKeys) {
    EXPECT_NE(line.find(std::string(key) + "="), std::string::npos) << key;
  }
  EXPECT_NE(line.find("node=alpha listen=127.0.0.1:7471"), std::string::npos);
  EXPECT_NE(line.find("socket_mode=0660 socket_group=rdmamsg"), std::string::npos);
  EXPECT_NE(line.find("peers=1[beta@127.0.0.2:7471]"), std::string::npos);
  EXPECT_NE(line.find("buffer_size=256KiB buffer_count=16 credits=15"), std::string::npos);
  EXPECT_NE(line.find("heartbeat_interval=1s"), std::string::npos);
}

TEST(LoaderTest, CreditsAreBufferCountMinusOne) {
  EXPECT_EQ(Buffers::creditsFor(2), 1u);
  EXPECT_EQ(Buffers::creditsFor(64), 63u);
}

}  // namespace
}  // namespace rdmamsg::config
