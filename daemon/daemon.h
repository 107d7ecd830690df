// rdmamsgd: one thread, one libevent loop. The Daemon wires the pieces
// together — the mesh of peer connections over RDMA, the local client
// server, the router between them — and speaks to systemd: READY=1 once it
// serves, STATUS= lines as peers come and go, WATCHDOG=1 while the loop
// turns (under WatchdogSec=), STOPPING=1 on SIGTERM, then a
// clean teardown (clients told, connections disconnected and flushed, RDMA
// resources released) and exit 0.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "config/config.h"
#include "daemon/config_reader.h"
#include "daemon/local/local_server.h"
#include "daemon/loop/event_loop.h"
#include "daemon/loop/events.h"
#include "daemon/metrics_server.h"
#include "daemon/peer/mesh.h"
#include "daemon/router.h"

namespace rdmamsg {

// What the command line adds to the configuration file; a reload reads
// the file (cfg.sourceFile) again with the same overrides.
struct CommandLine {
  std::optional<std::string> node;      // --node
  std::optional<std::string> logLevel;  // --log-level
};

class Daemon {
 public:
  // Throws std::runtime_error (with a message for the operator) when it
  // cannot start: socket path, rdma_cm address, RDMA resources.
  explicit Daemon(config::Config cfg, CommandLine cmdline = {});
  ~Daemon();
  // Runs until SIGTERM/SIGINT and a clean teardown; returns the exit code.
  int run();

  loop::EventLoop& loop() { return loop_; }

 private:
  void stop(const char* why);
  // SIGHUP: read the file again, off the loop (config_reader.h), and apply
  // what changed (config/reload.h); a file with problems changes nothing.
  void reload();
  void applyReload(const config::LoadResult& loaded);
  void updateStatus();
  void petWatchdog();  // WATCHDOG=1, and again in half the interval

  config::Config config_;
  CommandLine cmdline_;
  Router::ConfigState configState_;
  uint64_t incarnation_;
  loop::EventLoop loop_;
  Router router_;
  std::unique_ptr<peer::Mesh> mesh_;
  std::unique_ptr<local::LocalServer> server_;
  std::unique_ptr<MetricsServer> metrics_;  // only with metrics_listen
  std::unique_ptr<loop::SignalEvent> sigterm_, sigint_, sighup_;
  std::unique_ptr<ConfigReader> reader_;
  std::unique_ptr<loop::Timer> statusTimer_;
  std::unique_ptr<loop::Timer> watchdogTimer_;  // only under a systemd watchdog
  std::chrono::microseconds watchdogInterval_{0};
  std::string lastStatus_;
  bool stopping_ = false;
};

}  // namespace rdmamsg
