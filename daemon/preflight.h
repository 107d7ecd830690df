// Preflight: what rdmamsgd needs from the host, checked before it serves
// (rdmamsgd --preflight prints it; at start it is logged). Each check says
// what it found and, when it fails, how to fix it.
//
// - RDMA devices: listed and opened through libibverbs (which is what
//   needs /dev/infiniband/uverbsN); a permission problem names the node.
// - rdma_cm: its event channel opened (/dev/infiniband/rdma_cm); with
//   --preflight, the listen address bound to a device.
// - device limits: the configuration fits max_qp_wr, max_cqe, max_sge.
// - registered memory: computed from the configuration and compared with
//   RLIMIT_MEMLOCK (unless CAP_IPC_LOCK lifts the limit).
// - fork safety: rdmamsgd never forks, and librdmamsg does not use verbs,
//   so ibv_fork_init is not needed; RDMAV_FORK_SAFE set is reported (it
//   costs every registration a madvise).
// - the client socket's directory exists.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"

namespace rdmamsg::preflight {

enum class Outcome { kOk, kWarning, kConfigProblem, kHostProblem };

struct Check {
  std::string what;  // "RDMA devices", "registered memory", ...
  Outcome outcome = Outcome::kOk;
  std::string detail;  // what was found, and for a failure how to fix it
};

// Memory the configuration registers with the device.
struct MemoryNeed {
  uint64_t perConnection = 0;  // a connection's send and receive buffers
  uint64_t steady = 0;         // one connection per peer
  uint64_t peak = 0;           // two per peer while duplicates resolve, plus spares
};
MemoryNeed memoryNeed(const config::Config& cfg);

// `bindListen`: also bind a rdma_cm id to the listen address (for
// --preflight; at start the daemon binds it itself).
std::vector<Check> run(const config::Config& cfg, bool bindListen);

// 0 when every check passed (warnings allowed); 78 when the configuration
// does not fit this host; 69 (EX_UNAVAILABLE) when the host lacks what the
// daemon needs.
int exitCode(const std::vector<Check>& checks);
const char* toString(Outcome o);

}  // namespace rdmamsg::preflight
