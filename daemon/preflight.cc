// Preflight checks (preflight.h).
#include "daemon/preflight.h"

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/sys_error.h"
#include "config/check_command.h"
#include "config/units.h"
#include "daemon/rdma/limits.h"
#include "daemon/rdma/verbs.h"

namespace rdmamsg::preflight {

namespace {

constexpr int kExitUnavailable = 69;  // sysexits.h EX_UNAVAILABLE

// CAP_IPC_LOCK in the effective set lifts RLIMIT_MEMLOCK for pinning.
bool hasIpcLock() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("CapEff:", 0) != 0) continue;
    const uint64_t caps = std::strtoull(line.c_str() + 7, nullptr, 16);
    return (caps >> 14) & 1;  // CAP_IPC_LOCK
  }
  return false;
}

Check devices() {
  Check c{"RDMA devices", Outcome::kOk, ""};
  errno = 0;
  int n = 0;
  rdma::DeviceListPtr list(ibv_get_device_list(&n));
  if (!list || n == 0) {
    const int e = errno;
    c.outcome = Outcome::kHostProblem;
    c.detail = "none visible";
    if (e == ENOSYS || !std::filesystem::exists("/dev/infiniband"))
      c.detail += " (no /dev/infiniband: the kernel's RDMA support is not loaded)";
    c.detail +=
        ". Fix: load the NIC's RDMA driver and ib_uverbs (e.g. modprobe mlx5_ib, or rdma_rxe "
        "for soft RoCE; rdma-core's rdma-load-modules@ units do it at boot) and check with "
        "`ibv_devices`; without RDMA hardware, run rdmamsgd under softrdma-run";
    return c;
  }
  for (int i = 0; i < n; i++) {
    const std::string name = ibv_get_device_name(list[i]);
    const std::string node = std::string("/dev/infiniband/") + list[i]->dev_name;
    errno = 0;
    rdma::ContextPtr ctx(ibv_open_device(list[i]));
    if (!ctx) {
      const int e = errno;
      c.outcome = Outcome::kHostProblem;
      c.detail +=
          (c.detail.empty() ? "" : "; ") + name + ": cannot be opened (" + errnoText(e) + ")";
      if (e == EACCES || e == EPERM)
        c.detail += ". Fix: give the daemon's user read-write access to " + node +
                    " (udev rule, or the group that owns it); under systemd, "
                    "DeviceAllow=char-infiniband_verbs rw";
      continue;
    }
    ibv_device_attr a{};
    if (ibv_query_device(ctx.get(), &a) == 0)
      c.detail += (c.detail.empty() ? "" : "; ") + name + " (max_qp_wr " +
                  std::to_string(a.max_qp_wr) + ", max_cqe " + std::to_string(a.max_cqe) +
                  ", max_mr_size " + config::formatSize(a.max_mr_size) + ")";
  }
  return c;
}

// Whether this node's rail `address` binds (each rail of `listen` has its own listener).
void bindRail(rdma_event_channel* ch, const config::Address& address, Check& c) {
  Result<rdma::CmIdPtr> created = rdma::createCmId(ch);
  if (!created.ok()) {
    c.outcome = Outcome::kHostProblem;
    c.detail += "; no rdma_cm id can be made to bind the listen address (" +
                created.status().message() + ")";
    return;
  }
  rdma::CmIdPtr id = std::move(created).value();
  sockaddr_storage ss{};
  address.toSockaddr(ss);
  if (rdma_bind_addr(id.get(), reinterpret_cast<sockaddr*>(&ss)) == 0) {
    c.detail += "; listen address " + address.toString() + " binds";
    if (id->verbs != nullptr)
      c.detail += std::string(" to RDMA device ") + ibv_get_device_name(id->verbs->device);
    return;
  }
  const int e = errno;
  if (c.outcome != Outcome::kConfigProblem)
    c.outcome = e == EADDRINUSE ? Outcome::kWarning : Outcome::kConfigProblem;
  c.detail += "; listen address " + address.toString() + " cannot be bound (" + errnoText(e) + ")";
  c.detail += e == EADDRINUSE ? ": in use (is rdmamsgd already running?)"
                              : ". Fix: set listen: to an address of an RDMA-capable interface "
                                "(`rdma link` shows which netdev each device uses)";
}

Check rdmaCm(const config::Config& cfg, bool bindListen) {
  Check c{"rdma_cm", Outcome::kOk, ""};
  rdma::EventChannelPtr ch(rdma_create_event_channel());
  if (!ch) {
    const int e = errno;
    c.outcome = Outcome::kHostProblem;
    c.detail = "cannot open its event channel (" + errnoText(e) + ")";
    c.detail += e == EACCES || e == EPERM
                    ? ". Fix: give the daemon's user read-write access to /dev/infiniband/rdma_cm "
                      "(under systemd: DeviceAllow=/dev/infiniband/rdma_cm rw)"
                    : ". Fix: load rdma_ucm (modprobe rdma_ucm)";
    return c;
  }
  c.detail = "event channel opened";
  if (bindListen)
    for (const config::Address& rail : cfg.listenRails())
      bindRail(ch.get(), rail, c);
  return c;
}

Check limits(const config::Config& cfg) {
  Check c{"device limits", Outcome::kOk, ""};
  auto info = rdma::probeDevice(cfg.listen);
  if (!info) {
    c.outcome = Outcome::kWarning;
    c.detail = "not checked: " + info.status().message();
    return c;
  }
  auto problems = rdma::checkLimits(cfg, info->attr, info->name);
  if (problems.empty()) {
    c.detail = "the configuration fits " + info->name;
    return c;
  }
  c.outcome = Outcome::kConfigProblem;
  for (const auto& p : problems)
    c.detail += (c.detail.empty() ? "" : "; ") + p;
  return c;
}

Check memory(const config::Config& cfg) {
  Check c{"registered memory", Outcome::kOk, ""};
  const MemoryNeed m = memoryNeed(cfg);
  c.detail = config::formatSize(m.perConnection) + " per connection, " +
             config::formatSize(m.steady) + " for " + std::to_string(cfg.peers.size()) +
             (cfg.peers.size() == 1 ? " peer" : " peers") +
             (cfg.laneCount() != cfg.peers.size()
                  ? " in " + std::to_string(cfg.laneCount()) + " connections (rail_policy spread)"
                  : std::string()) +
             " (send pool included), up to " + config::formatSize(m.peak) +
             " while connections are replaced (registered_memory_limit " +
             config::formatSize(cfg.buffers.registeredMemoryLimit) + ")";
  rlimit r{};
  getrlimit(RLIMIT_MEMLOCK, &r);
  if (r.rlim_cur == RLIM_INFINITY) {
    c.detail += "; RLIMIT_MEMLOCK unlimited";
    return c;
  }
  const std::string limit = config::formatSize(r.rlim_cur);
  if (hasIpcLock()) {
    c.detail += "; RLIMIT_MEMLOCK " + limit + " does not apply (CAP_IPC_LOCK)";
    return c;
  }
  const std::string fix =
      ". Fix: raise the limit (LimitMEMLOCK=infinity in the unit, `ulimit -l unlimited` in a "
      "shell, or a memlock line in /etc/security/limits.d/) or lower "
      "registered_memory_limit, buffer_size or send_buffers";
  if (r.rlim_cur < m.steady) {
    c.outcome = Outcome::kConfigProblem;
    c.detail += "; over RLIMIT_MEMLOCK of " + limit + fix;
  } else if (r.rlim_cur < m.peak) {
    c.outcome = Outcome::kWarning;
    c.detail +=
        "; RLIMIT_MEMLOCK of " + limit + " holds it only while no connection is replaced" + fix;
  } else {
    c.detail += "; within RLIMIT_MEMLOCK of " + limit;
  }
  return c;
}

Check forkSafety() {
  Check c{"fork safety", Outcome::kOk,
          "rdmamsgd does not fork, and librdmamsg talks to it over a Unix socket (no verbs in "
          "applications): ibv_fork_init is not needed"};
  for (const char* var : {"RDMAV_FORK_SAFE", "IBV_FORK_SAFE"})
    if (std::getenv(var) != nullptr) {
      c.outcome = Outcome::kWarning;
      c.detail += std::string("; ") + var +
                  " is set: every registration then pays for madvise(MADV_DONTFORK); unset it";
    }
  return c;
}

Check socketDir(const config::Config& cfg) {
  Check c{"client socket", Outcome::kOk, ""};
  const auto dir = std::filesystem::path(cfg.local.socket).parent_path();
  if (!std::filesystem::is_directory(dir)) {
    c.outcome = Outcome::kHostProblem;
    c.detail = dir.string() +
               " does not exist. Fix: create it (the unit's RuntimeDirectory= "
               "does), or set socket: elsewhere";
  } else if (access(dir.c_str(), W_OK | X_OK) != 0) {
    c.outcome = Outcome::kHostProblem;
    c.detail = dir.string() +
               " is not writable by this user. Fix: give the daemon's user the "
               "directory, or set socket: elsewhere";
  } else {
    c.detail = cfg.local.socket + " (its directory is writable)";
  }
  return c;
}

}  // namespace

MemoryNeed memoryNeed(const config::Config& cfg) {
  const rdma::MemoryPlan plan = rdma::memoryPlan(cfg);
  MemoryNeed m;
  m.perConnection = plan.perPeer;
  m.steady = std::min(plan.allPeers, plan.limit);
  // While duplicates resolve each peer may briefly hold a second connection.
  m.peak = std::min(plan.allPeers + plan.perPeer * (cfg.laneCount() + 2), plan.limit);
  return m;
}

std::vector<Check> run(const config::Config& cfg, bool bindListen) {
  std::vector<Check> checks;
  checks.push_back(devices());
  checks.push_back(rdmaCm(cfg, bindListen));
  checks.push_back(limits(cfg));
  checks.push_back(memory(cfg));
  checks.push_back(forkSafety());
  checks.push_back(socketDir(cfg));
  return checks;
}

int exitCode(const std::vector<Check>& checks) {
  int rc = 0;
  for (const auto& c : checks) {
    if (c.outcome == Outcome::kHostProblem) rc = kExitUnavailable;
    if (c.outcome == Outcome::kConfigProblem && rc == 0) rc = config::kExitConfig;
  }
  return rc;
}

const char* toString(Outcome o) {
  switch (o) {
    case Outcome::kOk:
      return "ok";
    case Outcome::kWarning:
      return "warning";
    case Outcome::kConfigProblem:
      return "PROBLEM";
    case Outcome::kHostProblem:
      return "PROBLEM";
  }
  return "?";
}

}  // namespace rdmamsg::preflight
