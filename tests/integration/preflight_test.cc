// Integration: rdmamsgd --preflight, and the same checks at start. The host
// problems are real: no RDMA device (the daemon run without softrdma), a
// locked-memory limit below what the configuration registers (prlimit, with
// CAP_IPC_LOCK dropped by setpriv), a socket directory that does not exist.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "harness.h"

namespace rdmamsg::itest {
namespace {

struct Outcome {
  std::optional<ExitCode> code;
  std::string out;
};

class Preflight : public ::testing::Test {
 protected:
  void SetUp() override {
    port_ = pickPort({"127.0.0.1"});
    ASSERT_NE(port_, 0);
    writeConfig(dir_.file("alpha.sock"));
  }
  void writeConfig(const std::string& socket) {
    writeFile(config_, "node: alpha\nsocket: " + socket +
                           "\npeers:\n"
                           "  - {name: alpha, address: 127.0.0.1:" +
                           std::to_string(port_) +
                           "}\n"
                           "  - {name: beta, address: 127.0.0.2:" +
                           std::to_string(port_) + "}\n");
  }
  // Runs `prefix` + rdmamsgd -c CONFIG + `args` to its exit.
  Outcome run(std::vector<std::string> prefix, const std::vector<std::string>& args) {
    Process p;
    Process::Options o;
    o.argv = std::move(prefix);
    o.argv.insert(o.argv.end(), {daemonBinary(), "-c", config_});
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.stdoutPath = dir_.file("out");
    Outcome r;
    if (!p.start(o)) return r;
    r.code = p.wait(20s);
    r.out = readFile(dir_.file("out"));
    return r;
  }
  // No CAP_IPC_LOCK, and RLIMIT_MEMLOCK of 64 KiB.
  std::vector<std::string> lowMemlock() const {
    return {"/usr/bin/setpriv", "--bounding-set=-ipc_lock", "--inh-caps=-ipc_lock",
            "/usr/bin/prlimit", "--memlock=65536:65536",    softrdmaRun()};
  }
  TempDir dir_;
  std::string config_ = dir_.file("alpha.yaml");
  uint16_t port_ = 0;
};

TEST_F(Preflight, AReadyHostPassesEveryCheck) {
  Outcome r = run({softrdmaRun()}, {"--preflight"});
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("ok       RDMA devices: softrdma0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("listen address 127.0.0.1:" + std::to_string(port_) + " binds"),
            std::string::npos)
      << r.out;
  // 3 x 256 KiB shared receive buffers per connection; with one peer, the 8MiB send
  // pool and 8MiB to lend.
  EXPECT_NE(r.out.find("registered memory: 768KiB per connection, 17152KiB for 1 peer"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("ready: rdmamsgd can start"), std::string::npos) << r.out;
}

TEST_F(Preflight, NoRdmaDeviceIsAHostProblemNamingTheFix) {
  // The system's libibverbs, looking at an empty sysfs (SYSFS_PATH): no
  // device, on any host.
  Outcome r = run({"/usr/bin/env", "SYSFS_PATH=" + dir_.path().string()}, {"--preflight"});
  EXPECT_EQ(r.code, 69) << r.out;
  EXPECT_NE(r.out.find("PROBLEM  RDMA devices: none visible"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("softrdma-run"), std::string::npos) << r.out;
}

TEST_F(Preflight, ALockedMemoryLimitBelowTheConfigurationIsRefusedAtStartToo) {
  Outcome r = run(lowMemlock(), {"--preflight"});
  EXPECT_EQ(r.code, 78) << r.out;
  EXPECT_NE(r.out.find("over RLIMIT_MEMLOCK of 64KiB"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("LimitMEMLOCK=infinity"), std::string::npos) << r.out;

  // Started for real, the daemon says the same and exits 78 before serving.
  Outcome start = run(lowMemlock(), {});
  EXPECT_EQ(start.code, 78) << start.out;
  EXPECT_NE(start.out.find("cannot start: registered memory"), std::string::npos) << start.out;

  // Small buffers fit the same limit.
  writeFile(config_, readFile(config_) + "buffer_size: 1KiB\nbuffer_count: 4\n");
  Outcome small = run(lowMemlock(), {"--preflight"});
  EXPECT_EQ(small.code, 0) << small.out;
}

TEST_F(Preflight, UnderTheJournalEveryLineCarriesItsSyslogPriority) {
  // When stderr is the stream JOURNAL_STREAM names (device:inode), journald
  // takes a line's priority from its "<N>" prefix: info 6, critical 2.
  writeFile(dir_.file("out"), "");
  struct stat st {};
  ASSERT_EQ(::stat(dir_.file("out").c_str(), &st), 0);
  const std::string stream = std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
  std::vector<std::string> prefix{"/usr/bin/env", "JOURNAL_STREAM=" + stream};
  for (auto& arg : lowMemlock())
    prefix.push_back(arg);
  Outcome r = run(prefix, {});
  EXPECT_EQ(r.code, 78) << r.out;
  EXPECT_NE(r.out.find("<6>configuration: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("<2>cannot start: registered memory"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("<info>"), std::string::npos) << r.out;

  // A JOURNAL_STREAM inherited by a daemon whose stderr is somewhere else
  // (another file): lines keep their timestamps and level names.
  prefix[1] = "JOURNAL_STREAM=1:1";
  Outcome other = run(prefix, {});
  EXPECT_EQ(other.code, 78) << other.out;
  EXPECT_EQ(other.out.find("<6>"), std::string::npos) << other.out;
  EXPECT_NE(other.out.find(" info configuration: "), std::string::npos) << other.out;
}

TEST_F(Preflight, AnUnknownLogLevelOnTheCommandLineIsRefused) {
  // A typo must not silently turn logging off.
  Outcome r = run({softrdmaRun()}, {"--log-level", "inf"});
  ASSERT_TRUE(r.code.has_value());
  EXPECT_NE(*r.code, 0) << r.out;
  EXPECT_NE(r.out.find("'inf' is not a log level"), std::string::npos) << r.out;
}

TEST_F(Preflight, AMissingSocketDirectoryIsNamed) {
  writeConfig(dir_.file("missing/alpha.sock"));
  Outcome r = run({softrdmaRun()}, {"--preflight"});
  EXPECT_EQ(r.code, 69) << r.out;
  EXPECT_NE(r.out.find(dir_.file("missing") + " does not exist"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace rdmamsg::itest
