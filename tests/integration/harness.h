// Integration-test harness: runs real rdmamsgd processes (under softrdma-run)
// and the rdmamsg CLI, each test in its own temporary directory with its own
// configuration, sockets and ports, and stops every process it started even
// when an assertion fails. Daemon logs are printed when a test fails;
// RDMAMSG_ITEST_KEEP=1 keeps each test's directory (configs, logs).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/taker.h"

namespace rdmamsg::itest {

using test::Taker;

using namespace std::chrono_literals;
using Json = nlohmann::json;

// The binaries under test (paths compiled in by CMake).
std::string daemonBinary();
std::string cliBinary();
std::string softrdmaRun();
std::string softrdmaCtl();           // sends a command to a program's SOFTRDMA_CONTROL socket
std::string hostilePeerBinary();     // tests/integration/hostile_peer.cc
std::string handshakeRelayBinary();  // tests/integration/handshake_relay.cc
std::string slowNamesLibrary();      // tests/integration/slow_names.c, for LD_PRELOAD

// A private temporary directory, removed with everything in it.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

void writeFile(const std::string& path, const std::string& text);
std::string readFile(const std::string& path);

// Exit status of a child: the exit code, or -signal when killed by a signal.
using ExitCode = int;

// One child process: argv run with stdin/stdout/stderr redirected to files.
// The destructor kills (SIGKILL) and reaps it if it still runs.
class Process {
 public:
  struct Options {
    std::vector<std::string> argv;
    std::string stdinPath = "/dev/null";
    std::string stdoutPath = "/dev/null";
    std::string stderrPath;  // empty: same file as stdout
    bool append = false;
  };
  Process() = default;
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  bool start(const Options& options);
  pid_t pid() const { return pid_; }
  bool running();
  void signal(int sig);
  // Waits for the exit up to `timeout`; nullopt if it still runs.
  std::optional<ExitCode> wait(std::chrono::milliseconds timeout);
  std::optional<ExitCode> exitCode() const { return exit_; }
  // SIGKILL and reap.
  void kill9();

 private:
  bool reap(bool block);
  pid_t pid_ = -1;
  std::optional<ExitCode> exit_;
};

// Runs the CLI to completion (bounded by `timeout`, then killed).
struct CliResult {
  ExitCode code = -1;
  std::string out, err;
};
CliResult runCli(const TempDir& dir, const std::vector<std::string>& args,
                 const std::string& input = "", std::chrono::milliseconds timeout = 30s);

// One rdmamsgd under softrdma-run, its stdout and stderr appended to a log
// file. The destructor stops it (SIGTERM, then SIGKILL) and, when the test
// has failed, prints its log.
class DaemonProcess {
 public:
  DaemonProcess(std::string name, std::string configPath, std::string socketPath,
                std::string logPath, std::vector<std::string> extraArgs = {});
  ~DaemonProcess();
  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;

  const std::string& name() const { return name_; }
  const std::string& socket() const { return socket_; }
  const std::string& logPath() const { return logPath_; }
  std::string log() const { return readFile(logPath_); }
  pid_t pid() const { return process_.pid(); }

  // Starts it (appending to the log) and waits until its socket answers a
  // status request; false if it exited or did not get there in time.
  bool start(std::chrono::milliseconds timeout = 10s);
  // Starts without waiting (for daemons expected to fail).
  bool launch();
  bool running() { return process_.running(); }
  // SIGTERM and wait for the exit code; nullopt if it did not exit in time
  // (it is then killed).
  std::optional<ExitCode> stop(std::chrono::milliseconds timeout = 5s);
  std::optional<ExitCode> waitExit(std::chrono::milliseconds timeout);
  void kill9() { process_.kill9(); }
  void signal(int sig) { process_.signal(sig); }
  bool restart(std::chrono::milliseconds timeout = 10s);
  // The SOFTRDMA_CONTROL socket of its softrdma (next to its log).
  std::string controlPath() const { return logPath_ + ".ctl"; }
  // Runs the daemon under `wrapper` (e.g. {"ip", "netns", "exec", NAME}).
  void setWrapper(std::vector<std::string> wrapper) { wrapper_ = std::move(wrapper); }
  // Waits until the log contains `text`.
  bool waitLog(const std::string& text, std::chrono::milliseconds timeout = 10s) const;
  void printLog() const;

 private:
  std::string name_, config_, socket_, logPath_;
  std::vector<std::string> extraArgs_;
  std::vector<std::string> wrapper_;
  Process process_;
};

// The daemon's status over librdmamsg; nullopt when it cannot be had.
std::optional<Json> statusOf(const std::string& socket, std::chrono::milliseconds timeout = 2s);
// Polls the status until `pred` holds; false at the deadline.
bool waitForStatus(const std::string& socket, const std::function<bool(const Json&)>& pred,
                   std::chrono::milliseconds timeout = 10s);
// The entry of `peer` in a status, or nullptr.
const Json* peerEntry(const Json& status, const std::string& peer);
std::string peerState(const Json& status, const std::string& peer);
bool allPeersEstablished(const Json& status);
bool hasService(const Json& status, const std::string& service);

// Settings of a test mesh (fast timers by default).
struct MeshOptions {
  std::string heartbeatInterval = "200ms";
  std::string heartbeatTimeout = "1s";
  std::string reconnectBackoffMin = "50ms";
  std::string reconnectBackoffMax = "1s";
  std::string connectTimeout = "2s";
  std::string messageTimeout = "10s";
  std::string maxMessageSize;  // empty: the default
  std::string logLevel = "info";
  std::string extra;                                            // more YAML lines, added verbatim
  std::map<std::string, std::string> nodeExtra;                 // more YAML lines for one node
  std::map<std::string, std::vector<std::string>> nodeWrapper;  // DaemonProcess::setWrapper
};

// A mesh of daemons named by `names`, the i-th on 127.0.0.(i+1), all on one
// random free port. Every node gets its own config file (the whole mesh, its
// own socket) and is started with --node. start() retries with other ports
// when one is taken.
class Cluster {
 public:
  explicit Cluster(std::vector<std::string> names, MeshOptions options = {});
  ~Cluster();

  bool start(std::chrono::milliseconds timeout = 15s);
  DaemonProcess& operator[](const std::string& name);
  std::string socket(const std::string& name) const;
  std::string configPath(const std::string& name) const;
  std::string address(const std::string& name) const;
  uint16_t port() const { return port_; }
  TempDir& dir() { return dir_; }
  // Waits until every running daemon sees every peer established.
  bool waitFullMesh(std::chrono::milliseconds timeout = 10s);
  const std::vector<std::string>& names() const { return names_; }

 private:
  void writeConfigs();
  TempDir dir_;
  std::vector<std::string> names_;
  MeshOptions options_;
  uint16_t port_ = 0;
  std::map<std::string, std::unique_ptr<DaemonProcess>> daemons_;
};

// softrdma's device counters in a running daemon (`softrdma-ctl PATH counters`, names as rxe's
// hw_counters: send_rnr_err, retry_rnr_exceeded_err, rdma_recvs, ...); nullopt when they cannot be
// read.
std::optional<std::map<std::string, uint64_t>> softrdmaCounters(const DaemonProcess& d);
// Link credits keep RNR out of normal operation (docs/architecture.md): no receive was ever
// missing in `d` (send_rnr_err and retry_rnr_exceeded_err zero). Call it while the daemon runs.
// Returns what it received (rdma_recvs).
uint64_t expectNoRnr(const DaemonProcess& d);
// expectNoRnr for every daemon of `c` that runs, and one of them received something (the
// counters are live).
void expectNoRnr(Cluster& c);

// Starts `rdmamsg listen SERVICE --count N` on `node` (stdout to `outPath`,
// stderr next to it) and waits until the service is registered.
bool startListener(Process& p, const Cluster& c, const std::string& node,
                   const std::string& service, int count, const std::string& outPath);

// A daemon on `host` that calls itself `name` and knows the cluster's alpha,
// listening on `port` (0: a free one), with `extra` YAML lines (a secret).
// Its files are impostor.{yaml,sock,log} in the cluster's directory.
std::unique_ptr<DaemonProcess> startImpostor(Cluster& c, const std::string& name,
                                             const std::string& host, uint16_t port = 0,
                                             const std::string& extra = "");
// `socket`'s daemon dialed `peer` at least `dials` times, or is connected to
// it (the failure an impostor test guards against).
bool dialedAtLeast(const std::string& socket, const std::string& peer, uint64_t dials);
// On `node`, `peer` is still established on the connection it had (same
// `connects` and `incarnation`) and carries a message.
void expectPeerUntouched(Cluster& c, const std::string& node, const std::string& peer,
                         uint64_t connects, const std::string& incarnation);

// Runs a shell command, its output discarded; true when it exits 0.
bool sh(const std::string& cmd);
// The path of iproute2's ip, for running a daemon in a network namespace.
std::string ipBinary();

// A port in [20000, 32000) free for TCP on every address in `ips` right now.
uint16_t pickPort(const std::vector<std::string>& ips);

}  // namespace rdmamsg::itest
