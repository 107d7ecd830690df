// The daemon's wiring and lifecycle (daemon.h).
#include "daemon/daemon.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>

#include <time.h>

#include <algorithm>
#include <random>
#include <variant>

#include "config/loader.h"
#include "config/reload.h"

namespace rdmamsg {

namespace {

uint64_t newIncarnation() {
  std::random_device rd;
  uint64_t v = (uint64_t{rd()} << 32) ^ rd();
  v ^= static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  return v != 0 ? v : 1;
}

// How long `idle_strategy: adaptive` spins before the loop sleeps: two
// sleeps and wake-ups' worth (about 25 us each here: docs/performance.md,
// "Idle strategies"), as the clients' kAdaptiveSpin.
constexpr std::chrono::microseconds kAdaptiveSpin{50};

local::LocalServerConfig localConfig(const config::Config& c) {
  local::LocalServerConfig l;
  l.listener.path = c.local.socket;
  l.listener.mode = c.local.socketMode;
  l.listener.group = c.local.socketGroup.value_or("");
  // systemd socket activation: use the socket it passes, if any.
  if (sd_listen_fds(0) >= 1) l.listener.inheritedFd = SD_LISTEN_FDS_START;
  l.policy = c.local.localPolicy;
  l.sharedMemory = c.local.sharedMemory;
  l.nodeName = c.node;
  l.maxMessageSize = static_cast<uint32_t>(c.buffers.maxMessageSize);
  size_t frame = c.buffers.maxMessageSize + 4096;
  // A listener with 2 MiB unread is congested: nothing more is delivered to it
  // until it drains to 512 KiB (one message larger than that still goes to an
  // idle listener). This bounds the daemon's memory per slow listener.
  l.outputHighWatermark = 2u << 20;
  l.outputLowWatermark = 512u << 10;
  l.outputReadStop = std::max<size_t>(16u << 20, 2 * frame + l.outputHighWatermark);
  return l;
}

}  // namespace

Daemon::Daemon(config::Config cfg, CommandLine cmdline)
    : config_(std::move(cfg)),
      cmdline_(std::move(cmdline)),
      incarnation_(newIncarnation()),
      router_(config_, loop_) {
  signal(SIGPIPE, SIG_IGN);
  loop_.setIdleStrategy(config_.idleStrategy, kAdaptiveSpin);
  mesh_ = std::make_unique<peer::Mesh>(loop_, config_, router_, incarnation_);
  server_ = std::make_unique<local::LocalServer>(loop_, localConfig(config_), router_);
  router_.attach(server_.get(), mesh_.get());
  server_->setDrainedCallback([this](local::SessionId s) { router_.onSessionDrained(s); });
  mesh_->start();
  if (config_.metricsListen)
    metrics_ = std::make_unique<MetricsServer>(
        loop_, *config_.metricsListen, [this] { return status::toJson(router_.snapshot()); });
  sigterm_ = std::make_unique<loop::SignalEvent>(loop_, SIGTERM, [this](int) { stop("SIGTERM"); });
  sigint_ = std::make_unique<loop::SignalEvent>(loop_, SIGINT, [this](int) { stop("SIGINT"); });
  reader_ = std::make_unique<ConfigReader>(
      loop_, [this](const config::LoadResult& loaded) { applyReload(loaded); });
  sighup_ = std::make_unique<loop::SignalEvent>(loop_, SIGHUP, [this](int) { reload(); });
  statusTimer_ = std::make_unique<loop::Timer>(loop_, [this] { updateStatus(); });
  // systemd's watchdog (WatchdogSec= in the unit): WATCHDOG=1 at half the
  // interval, from a timer of the loop, so that it is sent only while the
  // loop turns. A wedged loop misses it and systemd restarts the service.
  uint64_t usec = 0;
  if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
    watchdogInterval_ = std::chrono::microseconds(std::max<uint64_t>(usec / 2, 1));
    watchdogTimer_ = std::make_unique<loop::Timer>(loop_, [this] { petWatchdog(); });
  }
}

Daemon::~Daemon() {
  // Clients first, then the mesh (connections, devices, event channel).
  metrics_.reset();
  server_.reset();
  mesh_.reset();
}

int Daemon::run() {
  spdlog::info("rdmamsgd {} serving: node {}, {} peers, clients on {}", RDMAMSG_VERSION,
               config_.node, config_.peers.size(), server_->socketPath());
  sd_notify(0, "READY=1");
  updateStatus();
  if (watchdogTimer_) {
    spdlog::info("systemd watchdog: notifying every {} ms", watchdogInterval_.count() / 1000);
    petWatchdog();
  }
  const Status ran = loop_.run();
  if (!ran.ok()) {
    spdlog::critical("the event loop stopped: {}", ran.message());
    return 1;
  }
  spdlog::info("rdmamsgd stopped");
  return 0;
}

void Daemon::petWatchdog() {
  sd_notify(0, "WATCHDOG=1");
  watchdogTimer_->arm(watchdogInterval_);
}

void Daemon::updateStatus() {
  size_t up = 0;
  for (const peer::Peer* p : mesh_->configuredPeers())
    up += p->established() ? 1 : 0;
  std::string s = "STATUS=" + std::to_string(up) + "/" + std::to_string(config_.peers.size()) +
                  " peers established, " + std::to_string(server_->sessionCount()) + " clients, " +
                  std::to_string(router_.serviceCount()) + " services";
  if (s != lastStatus_) {
    sd_notify(0, s.c_str());
    lastStatus_ = s;
  }
  if (!stopping_) statusTimer_->arm(std::chrono::seconds(1));
}

void Daemon::reload() {
  if (stopping_) return;
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%llu",
             static_cast<unsigned long long>(now.tv_sec) * 1000000ull +
                 static_cast<unsigned long long>(now.tv_nsec / 1000));
  spdlog::info("SIGHUP: reloading the configuration from {}", config_.sourceFile);
  // Read and checked off the loop: local_policy's name lookups may block.
  reader_->request(config_.sourceFile, cmdline_.node);
}

void Daemon::applyReload(const config::LoadResult& loaded) {
  if (stopping_) return;
  auto refuse = [this](const std::vector<std::string>& problems) {
    for (const auto& p : problems)
      spdlog::error("reload: {}", p);
    spdlog::error(
        "reload refused ({} problem{}): the running configuration (generation {}) is unchanged",
        problems.size(), problems.size() == 1 ? "" : "s", configState_.generation);
    configState_.lastReload =
        "refused: " + problems.front() +
        (problems.size() > 1
             ? " (and " + std::to_string(problems.size() - 1) + " more problems in the log)"
             : "");
    configState_.reloadsFailed++;
    router_.setConfigState(configState_);
    sd_notify(0, "READY=1");
  };
  if (!loaded.ok()) {
    std::vector<std::string> problems;
    for (const auto& p : loaded.problems())
      problems.push_back(p.toString());
    return refuse(problems);
  }
  auto planned = config::planReload(config_, loaded.config());
  if (const auto* why = std::get_if<std::string>(&planned)) return refuse({*why});
  auto& plan = std::get<config::ReloadPlan>(planned);
  if (auto problems = mesh_->prepareReload(plan.next); !problems.empty()) return refuse(problems);

  config_ = std::move(plan.next);
  if (!cmdline_.logLevel)
    spdlog::set_level(spdlog::level::from_str(std::string(config::toString(config_.logLevel))));
  else
    std::erase_if(plan.changed, [this](const std::string& c) {
      if (c.rfind("log_level:", 0) != 0) return false;
      spdlog::info("reload: {}: --log-level {} given on the command line stays in effect", c,
                   *cmdline_.logLevel);
      return true;
    });
  for (const auto& c : plan.changed)
    spdlog::info("reload: {}", c);
  for (const auto& c : plan.restartPending)
    spdlog::warn("reload: {}: takes effect when rdmamsgd restarts", c);
  for (const auto& n : plan.removed)
    spdlog::info("reload: peer {} removed: closing its connection", n);
  for (const auto& n : plan.added)
    spdlog::info("reload: peer {} added at {}", n, config_.findPeer(n)->address.toString());
  if (const size_t closed = server_->setPolicy(config_.local.localPolicy); closed > 0)
    spdlog::warn(
        "reload: local_policy: {} client(s) closed: the new policy does not allow what "
        "they held",
        closed);
  server_->setSharedMemory(config_.local.sharedMemory);  // for clients that connect from now on
  mesh_->applyPeers(plan.readdressed);
  mesh_->wakeAll();  // limits may have risen: held-back work goes on
  configState_.generation++;
  configState_.lastReload = "applied";
  configState_.restartPending = plan.restartPending;
  router_.setConfigState(configState_);
  spdlog::info(
      "configuration generation {} applied: {} peer(s) added, {} removed, {} readdressed, {} "
      "setting(s) changed, {} waiting for a restart",
      configState_.generation, plan.added.size(), plan.removed.size(), plan.readdressed.size(),
      plan.changed.size(), plan.restartPending.size());
  lastStatus_.clear();
  updateStatus();
  sd_notify(0, "READY=1");
}

void Daemon::stop(const char* why) {
  if (stopping_) return;
  stopping_ = true;
  spdlog::info("{}: stopping", why);
  sd_notify(0, "STOPPING=1\nSTATUS=stopping");
  statusTimer_->cancel();
  server_->closeAll(Status(Errc::shutting_down, "rdmamsgd on " + config_.node + " is stopping"));
  mesh_->shutdown([this] { loop_.exit(); });
}

}  // namespace rdmamsg
