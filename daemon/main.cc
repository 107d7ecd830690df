// rdmamsgd's command line: load and check the configuration, set up
// logging, run the daemon.
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "config/check_command.h"
#include "config/loader.h"
#include "daemon/daemon.h"
#include "daemon/logging.h"
#include "daemon/peer/mesh.h"
#include "daemon/preflight.h"
#include "daemon/rdma/limits.h"

namespace {

// --preflight: every check, one line each, then the verdict.
int preflightCommand(const rdmamsg::config::Config& cfg) {
  namespace pf = rdmamsg::preflight;
  std::cout << "rdmamsgd preflight for node " << cfg.node << " (" << cfg.sourceFile << ")\n";
  const auto checks = pf::run(cfg, /*bindListen=*/true);
  size_t problems = 0;
  for (const auto& c : checks) {
    std::cout << "  " << pf::toString(c.outcome)
              << std::string(9 - std::strlen(pf::toString(c.outcome)), ' ') << c.what << ": "
              << c.detail << "\n";
    problems += c.outcome == pf::Outcome::kConfigProblem || c.outcome == pf::Outcome::kHostProblem;
  }
  const int rc = pf::exitCode(checks);
  if (rc == 0)
    std::cout << "ready: rdmamsgd can start on this host\n";
  else
    std::cout << problems << " problem" << (problems == 1 ? "" : "s") << ": exit " << rc << "\n";
  return rc;
}

// At start: each check logged. A configuration that does not fit the host
// stops the daemon (78); a host problem is logged with its fix and the
// daemon goes on: a device may still appear (a wildcard listen waits for
// one), and what cannot work fails later with its own message.
int preflightAtStart(const rdmamsg::config::Config& cfg) {
  namespace pf = rdmamsg::preflight;
  const auto checks = pf::run(cfg, /*bindListen=*/false);
  int rc = 0;
  for (const auto& c : checks) {
    if (c.outcome == pf::Outcome::kOk) {
      spdlog::info("preflight: {}: {}", c.what, c.detail);
    } else if (c.outcome == pf::Outcome::kWarning) {
      spdlog::warn("preflight: {}: {}", c.what, c.detail);
    } else if (c.outcome == pf::Outcome::kHostProblem) {
      spdlog::error("preflight: {}: {}", c.what, c.detail);
    } else {
      spdlog::critical("cannot start: {}: {}", c.what, c.detail);
      rc = rdmamsg::config::kExitConfig;
    }
  }
  return rc;
}

// --check-config: the file itself, then what it asks of the RDMA device.
int checkConfig(const std::string& path, const std::optional<std::string>& node) {
  int rc = rdmamsg::config::checkConfigCommand(path, node, std::cout, std::cerr);
  if (rc != 0) return rc;
  auto loaded = rdmamsg::config::loadConfig(path, node);
  if (!loaded.ok()) return rdmamsg::config::kExitConfig;
  // Every rail's device must hold the configuration; two rails on one device
  // are allowed (the device is then a failure they share) and noted.
  const rdmamsg::config::Config& config = loaded.config();
  std::vector<std::pair<size_t, std::string>> devices;  // (rail, its device)
  bool fits = true;
  for (size_t rail = 0; rail < config.railCount(); rail++) {
    const auto& address = config.listenRail(rail);
    auto device = rdmamsg::rdma::probeDevice(address);
    if (!device) {
      std::cerr << path << ": note: RDMA device limits not checked for " << address.toString()
                << ": " << device.status().message() << "\n";
      continue;
    }
    for (const auto& [other, name] : devices)
      if (name == device->name)
        std::cerr << path << ": note: rails " << other << " and " << rail << " ("
                  << config.listenRail(other).toString() << ", " << address.toString()
                  << ") are both on RDMA device " << name
                  << ": a failure of that device takes both\n";
    devices.emplace_back(rail, device->name);
    for (const auto& p : rdmamsg::rdma::checkLimits(config, device->attr, device->name)) {
      std::cerr << path << ": " << p << "\n";
      fits = false;
    }
  }
  return fits ? 0 : rdmamsg::config::kExitConfig;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rdmamsgd: RDMA messaging daemon (one per host)"};
  std::string configPath = "/etc/rdmamsg/rdmamsgd.yaml";
  std::string checkPath;
  std::string node;
  std::string logLevel;
  app.add_option("-c,--config", configPath, "configuration file")->capture_default_str();
  app.add_option("--node", node, "this host's node name (its entry in peers; overrides node:)");
  app.add_option("--check-config", checkPath,
                 "validate FILE, print each problem with its line, exit 0 or 78");
  app.add_option("--log-level", logLevel,
                 "override log_level: trace|debug|info|warn|error|critical|off")
      ->check([](const std::string& text) -> std::string {
        if (rdmamsg::config::parseLogLevel(text)) return "";
        return "'" + text + "' is not a log level (trace|debug|info|warn|error|critical|off)";
      });
  bool preflight = false;
  app.add_flag("--preflight", preflight,
               "check the host for the configuration (RDMA devices, rdma_cm, device limits, "
               "locked memory, socket directory), print each finding with its fix, exit 0, 69 "
               "(host) or 78 (configuration)");
  app.set_version_flag("--version", std::string("rdmamsgd ") + RDMAMSG_VERSION);
  CLI11_PARSE(app, argc, argv);

  std::optional<std::string> nodeOverride;
  if (!node.empty()) nodeOverride = node;
  if (!checkPath.empty()) return checkConfig(checkPath, nodeOverride);

  auto loaded = rdmamsg::config::loadConfig(configPath, nodeOverride);
  if (!loaded.ok()) {
    for (const auto& p : loaded.problems())
      std::cerr << p.toString() << "\n";
    std::cerr << "rdmamsgd: not starting: the configuration has problems\n";
    return rdmamsg::config::kExitConfig;
  }
  rdmamsg::config::Config cfg = loaded.config();
  if (preflight) return preflightCommand(cfg);
  rdmamsg::logging::setup(cfg.logLevel);
  if (!logLevel.empty()) spdlog::set_level(spdlog::level::from_str(logLevel));
  spdlog::info("configuration: {}", rdmamsg::config::describe(cfg));
  int rc = preflightAtStart(cfg);
  if (rc != 0) {
    rdmamsg::logging::shutdown();
    return rc;
  }
  try {
    rdmamsg::CommandLine cmdline{nodeOverride, std::nullopt};
    if (!logLevel.empty()) cmdline.logLevel = logLevel;
    rdmamsg::Daemon daemon(std::move(cfg), std::move(cmdline));
    rc = daemon.run();
  } catch (const rdmamsg::peer::LimitError& e) {
    spdlog::critical("cannot start: the configuration does not fit the RDMA device: {}", e.what());
    rc = rdmamsg::config::kExitConfig;
  } catch (const std::exception& e) {
    spdlog::critical("cannot start: {}", e.what());
    rc = 1;
  }
  rdmamsg::logging::shutdown();  // what is queued is written before exit
  return rc;
}
