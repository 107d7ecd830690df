// The integration-test harness (harness.h).
#include "harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>

#include "rdmamsg/client.h"
#include "tests/support/wait.h"

namespace rdmamsg::itest {

std::string daemonBinary() {
  return RDMAMSG_ITEST_DAEMON;
}
std::string cliBinary() {
  return RDMAMSG_ITEST_CLI;
}
std::string softrdmaCtl() {
  return RDMAMSG_ITEST_SOFTRDMA_CTL;
}

std::string hostilePeerBinary() {
  return RDMAMSG_ITEST_HOSTILE_PEER;
}

std::string handshakeRelayBinary() {
  return RDMAMSG_ITEST_HANDSHAKE_RELAY;
}

std::string slowNamesLibrary() {
  return RDMAMSG_ITEST_SLOW_NAMES;
}

std::string softrdmaRun() {
  return RDMAMSG_ITEST_SOFTRDMA_RUN;
}

// ------------------------------------------------------------------ files

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "rdmamsg-itest-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) {
    ADD_FAILURE() << "mkdtemp: " << std::strerror(errno);
    return;
  }
  path_ = tmpl;
}

TempDir::~TempDir() {
  // RDMAMSG_ITEST_KEEP=1 keeps the directories (configs, logs) for a look.
  const char* keep = std::getenv("RDMAMSG_ITEST_KEEP");
  if (keep != nullptr && *keep != '\0' && std::string(keep) != "0") {
    std::cerr << "kept " << path_.string() << "\n";
    return;
  }
  std::error_code ec;
  if (!path_.empty()) std::filesystem::remove_all(path_, ec);
}

void writeFile(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
}

std::string readFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// ------------------------------------------------------------------ processes

Process::~Process() {
  if (pid_ > 0 && !exit_) kill9();
}

bool Process::start(const Options& o) {
  if (pid_ > 0 && !exit_) return false;
  pid_ = -1;
  exit_.reset();
  // Everything the child needs is prepared before fork: it only dups and execs.
  int in = ::open(o.stdinPath.c_str(), O_RDONLY | O_CLOEXEC);
  int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (o.append ? O_APPEND : O_TRUNC);
  int out = ::open(o.stdoutPath.c_str(), flags, 0644);
  int err = o.stderrPath.empty() ? -1 : ::open(o.stderrPath.c_str(), flags, 0644);
  std::vector<char*> argv;
  for (const auto& a : o.argv)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  bool ok = in >= 0 && out >= 0 && (o.stderrPath.empty() || err >= 0) && !o.argv.empty();
  if (ok) {
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(in, 0);
      ::dup2(out, 1);
      ::dup2(err >= 0 ? err : out, 2);
      ::close_range(3, ~0U, 0);            // no test sockets leak into the child
      ::setpgid(0, 0);                     // a terminal's signals are not meant for it
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // nor does it outlive a crashed test
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ok = pid_ > 0;
  }
  for (int fd : {in, out, err})
    if (fd >= 0) ::close(fd);
  return ok;
}

bool Process::reap(bool block) {
  if (pid_ <= 0 || exit_) return true;
  int st = 0;
  pid_t r = ::waitpid(pid_, &st, block ? 0 : WNOHANG);
  if (r != pid_) return false;
  exit_ = WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
  return true;
}

bool Process::running() {
  return pid_ > 0 && !reap(false);
}

void Process::signal(int sig) {
  if (running()) ::kill(pid_, sig);
}

std::optional<ExitCode> Process::wait(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return std::nullopt;
  test::waitFor([&] { return reap(false); }, timeout);
  return exit_;
}

void Process::kill9() {
  if (pid_ <= 0 || exit_) return;
  ::kill(pid_, SIGKILL);
  reap(true);
}

CliResult runCli(const TempDir& dir, const std::vector<std::string>& args, const std::string& input,
                 std::chrono::milliseconds timeout) {
  static int counter = 0;
  std::string tag = "cli" + std::to_string(++counter);
  Process::Options o;
  o.argv.push_back(cliBinary());
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  o.stdinPath = dir.file(tag + ".in");
  writeFile(o.stdinPath, input);
  o.stdoutPath = dir.file(tag + ".out");
  o.stderrPath = dir.file(tag + ".err");
  CliResult r;
  Process p;
  if (!p.start(o)) return r;
  auto code = p.wait(timeout);
  if (!code) {
    p.kill9();
    r.err = "(timed out) ";
  }
  r.code = code.value_or(-SIGKILL);
  r.out = readFile(o.stdoutPath);
  r.err += readFile(o.stderrPath);
  return r;
}

// ------------------------------------------------------------------ daemons

DaemonProcess::DaemonProcess(std::string name, std::string configPath, std::string socketPath,
                             std::string logPath, std::vector<std::string> extraArgs)
    : name_(std::move(name)),
      config_(std::move(configPath)),
      socket_(std::move(socketPath)),
      logPath_(std::move(logPath)),
      extraArgs_(std::move(extraArgs)) {}

DaemonProcess::~DaemonProcess() {
  if (process_.running()) {
    process_.signal(SIGCONT);  // in case a test stopped it
    process_.signal(SIGTERM);
    if (!process_.wait(5s)) process_.kill9();
  }
  if (::testing::Test::HasFailure()) printLog();
}

void DaemonProcess::printLog() const {
  std::cerr << "----- log of rdmamsgd " << name_ << " (" << logPath_ << ") -----\n"
            << log() << "----- end of log of " << name_ << " -----\n";
}

bool DaemonProcess::launch() {
  Process::Options o;
  // Its own control socket (a wrapper may name another: env's last word wins).
  o.argv = {"/usr/bin/env", "SOFTRDMA_CONTROL=" + controlPath()};
  o.argv.insert(o.argv.end(), wrapper_.begin(), wrapper_.end());
  for (const auto& a :
       {softrdmaRun(), daemonBinary(), std::string("-c"), config_, std::string("--node"), name_})
    o.argv.push_back(a);
  o.argv.insert(o.argv.end(), extraArgs_.begin(), extraArgs_.end());
  o.stdoutPath = logPath_;
  o.append = true;
  writeFile(logPath_ + ".tmp", "");  // make sure the directory is writable
  std::filesystem::remove(logPath_ + ".tmp");
  return process_.start(o);
}

bool DaemonProcess::start(std::chrono::milliseconds timeout) {
  if (!launch()) return false;
  bool up = test::waitFor(
      [&] { return !process_.running() || statusOf(socket_, 500ms).has_value(); }, timeout);
  return up && process_.running();
}

std::optional<ExitCode> DaemonProcess::stop(std::chrono::milliseconds timeout) {
  if (!process_.running()) return process_.exitCode();
  process_.signal(SIGTERM);
  auto code = process_.wait(timeout);
  if (!code) process_.kill9();
  return code;
}

std::optional<ExitCode> DaemonProcess::waitExit(std::chrono::milliseconds timeout) {
  return process_.wait(timeout);
}

bool DaemonProcess::restart(std::chrono::milliseconds timeout) {
  if (process_.running()) stop();
  return start(timeout);
}

bool DaemonProcess::waitLog(const std::string& text, std::chrono::milliseconds timeout) const {
  return test::waitFor([&] { return log().find(text) != std::string::npos; }, timeout);
}

// ------------------------------------------------------------------ status

std::optional<Json> statusOf(const std::string& socket, std::chrono::milliseconds timeout) {
  ConnectOptions opts;
  opts.clientName = "itest-status";
  opts.timeout = timeout;
  auto client = Client::connect(socket, opts);
  if (!client) return std::nullopt;
  auto text = client->status(timeout);
  if (!text) return std::nullopt;
  Json j = Json::parse(*text, nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

bool waitForStatus(const std::string& socket, const std::function<bool(const Json&)>& pred,
                   std::chrono::milliseconds timeout) {
  return test::waitFor(
      [&] {
        auto s = statusOf(socket);
        return s && pred(*s);
      },
      timeout);
}

const Json* peerEntry(const Json& status, const std::string& peer) {
  if (!status.contains("peers")) return nullptr;
  for (const auto& p : status["peers"])
    if (p.value("name", "") == peer) return &p;
  return nullptr;
}

std::string peerState(const Json& status, const std::string& peer) {
  const Json* p = peerEntry(status, peer);
  return p == nullptr ? "(absent)" : p->value("state", "(none)");
}

bool allPeersEstablished(const Json& status) {
  if (!status.contains("peers")) return false;
  for (const auto& p : status["peers"])
    if (p.value("state", "") != "established") return false;
  return true;
}

bool hasService(const Json& status, const std::string& service) {
  if (!status.contains("services")) return false;
  for (const auto& s : status["services"])
    if (s == service) return true;
  return false;
}

// ------------------------------------------------------------------ cluster

bool sh(const std::string& cmd) {
  return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0;
}

std::string ipBinary() {
  for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"})
    if (access(p, X_OK) == 0) return p;
  return "ip";
}

uint16_t pickPort(const std::vector<std::string>& ips) {
  static std::mt19937 rng(std::random_device{}() ^ static_cast<unsigned>(::getpid()));
  std::uniform_int_distribution<int> dist(20000, 31999);
  for (int attempt = 0; attempt < 200; attempt++) {
    auto port = static_cast<uint16_t>(dist(rng));
    bool free = true;
    for (const auto& ip : ips) {
      int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(port);
      ::inet_pton(AF_INET, ip.c_str(), &a.sin_addr);
      free = free && ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
      ::close(s);
    }
    if (free) return port;
  }
  return 0;
}

Cluster::Cluster(std::vector<std::string> names, MeshOptions options)
    : names_(std::move(names)), options_(std::move(options)) {}

Cluster::~Cluster() {
  // SIGTERM everyone at once, so that the stops overlap; the daemons'
  // destructors wait.
  for (auto& [name, d] : daemons_)
    if (d->running()) ::kill(d->pid(), SIGTERM);
  daemons_.clear();
}

std::string Cluster::address(const std::string& name) const {
  for (size_t i = 0; i < names_.size(); i++)
    if (names_[i] == name) return "127.0.0." + std::to_string(i + 1);
  return "127.0.0.250";
}

std::string Cluster::socket(const std::string& name) const {
  return dir_.file(name + ".sock");
}

std::string Cluster::configPath(const std::string& name) const {
  return dir_.file(name + ".yaml");
}

void Cluster::writeConfigs() {
  for (const auto& node : names_) {
    std::ostringstream y;
    y << "peers:\n";
    for (const auto& n : names_)
      y << "  - name: " << n << "\n    address: " << address(n) << ":" << port_ << "\n";
    y << "socket: " << socket(node) << "\n"
      << "heartbeat_interval: " << options_.heartbeatInterval << "\n"
      << "heartbeat_timeout: " << options_.heartbeatTimeout << "\n"
      << "reconnect_backoff_min: " << options_.reconnectBackoffMin << "\n"
      << "reconnect_backoff_max: " << options_.reconnectBackoffMax << "\n"
      << "connect_timeout: " << options_.connectTimeout << "\n"
      << "message_timeout: " << options_.messageTimeout << "\n"
      << "log_level: " << options_.logLevel << "\n";
    auto own = options_.nodeExtra.find(node);
    bool ownMax = own != options_.nodeExtra.end() &&
                  own->second.find("max_message_size:") != std::string::npos;
    if (!options_.maxMessageSize.empty() && !ownMax)
      y << "max_message_size: " << options_.maxMessageSize << "\n";
    y << options_.extra;
    if (own != options_.nodeExtra.end()) y << own->second;
    writeFile(configPath(node), y.str());
  }
}

bool Cluster::start(std::chrono::milliseconds timeout) {
  std::vector<std::string> ips;
  for (const auto& n : names_)
    ips.push_back(address(n));
  for (int attempt = 0; attempt < 5; attempt++) {
    daemons_.clear();
    port_ = pickPort(ips);
    if (port_ == 0) return false;
    writeConfigs();
    for (const auto& n : names_)
      std::filesystem::remove(dir_.file(n + ".log"));
    for (const auto& n : names_) {
      daemons_[n] =
          std::make_unique<DaemonProcess>(n, configPath(n), socket(n), dir_.file(n + ".log"));
      if (auto w = options_.nodeWrapper.find(n); w != options_.nodeWrapper.end())
        daemons_[n]->setWrapper(w->second);
    }
    bool ok = true;
    for (const auto& n : names_)
      ok = ok && daemons_[n]->start(timeout);
    if (ok) return true;
    // Taken in the meantime by someone else? Try another port.
    bool inUse = false;
    for (auto& [n, d] : daemons_)
      inUse = inUse || d->log().find("cannot bind") != std::string::npos;
    if (!inUse) return false;
    std::cerr << "port " << port_ << " taken, retrying with another\n";
  }
  return false;
}

DaemonProcess& Cluster::operator[](const std::string& name) {
  auto it = daemons_.find(name);
  if (it == daemons_.end()) throw std::out_of_range("no daemon " + name);
  return *it->second;
}

std::optional<std::map<std::string, uint64_t>> softrdmaCounters(const DaemonProcess& d) {
  Process ctl;
  Process::Options o;
  o.argv = {softrdmaCtl(), d.controlPath(), "counters"};
  o.stdoutPath = d.logPath() + ".counters";
  o.stderrPath = d.logPath() + ".counters.err";
  if (!ctl.start(o) || ctl.wait(10s) != std::optional<ExitCode>(0)) return std::nullopt;
  std::map<std::string, uint64_t> values;
  std::istringstream lines(readFile(o.stdoutPath));
  std::string name;
  uint64_t value = 0;
  while (lines >> name >> value)
    values[name] = value;
  if (values.empty()) return std::nullopt;
  return values;
}

uint64_t expectNoRnr(const DaemonProcess& d) {
  auto values = softrdmaCounters(d);
  EXPECT_TRUE(values) << d.name()
                      << ": no softrdma counters: " << readFile(d.logPath() + ".counters.err");
  if (!values) return 0;
  EXPECT_EQ((*values)["send_rnr_err"], 0u) << d.name() << " missed a receive (RNR)";
  EXPECT_EQ((*values)["retry_rnr_exceeded_err"], 0u) << d.name() << ": a send failed on RNR";
  return (*values)["rdma_recvs"];
}

void expectNoRnr(Cluster& c) {
  uint64_t received = 0;
  for (const auto& n : c.names())
    if (c[n].running()) received += expectNoRnr(c[n]);
  EXPECT_GT(received, 0u) << "no daemon received anything: the counters are not live";
}

bool startListener(Process& p, const Cluster& c, const std::string& node,
                   const std::string& service, int count, const std::string& outPath) {
  Process::Options o;
  o.argv = {cliBinary(), "--socket", c.socket(node),       "listen",
            service,     "--count",  std::to_string(count)};
  o.stdoutPath = outPath;
  o.stderrPath = outPath + ".err";
  if (!p.start(o)) return false;
  return waitForStatus(
      c.socket(node), [&](const Json& s) { return hasService(s, service); }, 10s);
}

bool Cluster::waitFullMesh(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (const auto& n : names_) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (!waitForStatus(socket(n), allPeersEstablished, std::max(left, 1ms))) return false;
  }
  return true;
}

std::unique_ptr<DaemonProcess> startImpostor(Cluster& c, const std::string& name,
                                             const std::string& host, uint16_t port,
                                             const std::string& extra) {
  if (port == 0) port = pickPort({host});
  const std::string config = c.dir().file("impostor.yaml");
  writeFile(config, "node: " + name + "\nsocket: " + c.dir().file("impostor.sock") + "\n" + extra +
                        "reconnect_backoff_min: 50ms\n"
                        "reconnect_backoff_max: 200ms\n"
                        "peers:\n"
                        "  - {name: alpha, address: " +
                        c.address("alpha") + ":" + std::to_string(c.port()) + "}\n  - {name: " +
                        name + ", address: " + host + ":" + std::to_string(port) + "}\n");
  auto impostor = std::make_unique<DaemonProcess>(name, config, c.dir().file("impostor.sock"),
                                                  c.dir().file("impostor.log"));
  if (!impostor->start()) ADD_FAILURE() << "the impostor did not start: " << impostor->log();
  return impostor;
}

bool dialedAtLeast(const std::string& socket, const std::string& peer, uint64_t dials) {
  return waitForStatus(socket, [&](const Json& s) {
    const Json* a = peerEntry(s, peer);
    return a != nullptr &&
           ((*a)["state"] == "established" || a->value("dials", uint64_t{0}) >= dials);
  });
}

void expectPeerUntouched(Cluster& c, const std::string& node, const std::string& peer,
                         uint64_t connects, const std::string& incarnation) {
  auto s = statusOf(c.socket(node));
  ASSERT_TRUE(s);
  EXPECT_EQ(peerState(*s, peer), "established");
  EXPECT_EQ(peerEntry(*s, peer)->value("connects", uint64_t{0}), connects);
  EXPECT_EQ(peerEntry(*s, peer)->value("incarnation", ""), incarnation);
  Process listener;
  const std::string out = c.dir().file("untouched-" + peer + ".out");
  ASSERT_TRUE(startListener(listener, c, peer, "inbox", 1, out));
  CliResult sent =
      runCli(c.dir(), {"--socket", c.socket(node), "send", peer + "/inbox"}, "secret\n");
  EXPECT_EQ(sent.code, 0) << sent.err;
  EXPECT_EQ(listener.wait(10s), 0);
  EXPECT_EQ(readFile(out), "secret\n");
}

}  // namespace rdmamsg::itest
