// softrdma-bench's parts (softrdma_bench.cc: the cases and the processes;
// bench_rdma.cc: the rdma_cm + verbs requester and responder; bench_tcp.cc:
// raw TCP, the baseline).
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string_view>

namespace softrdma_bench {

using Clock = std::chrono::steady_clock;
using Seconds = std::chrono::duration<double>;

enum class Transport { Send, Write, Tcp };
enum class Wait { Event, Busy };

// One measured case. For TCP, `batch` is the number of messages per write().
struct Case {
  const char* name;
  Transport transport;
  uint32_t size;         // message bytes
  int batch;             // WRs per ibv_post_send call / messages per write()
  Wait wait;             // completion handling (RDMA)
  uint32_t depth;        // receives posted by the responder (= sender credits), RDMA
  uint32_t repost;       // the responder reposts and returns credits in batches of this
  uint32_t sq_depth;     // requester's max_send_wr (and outstanding limit)
  uint32_t signal;       // every Nth WR is signalled
  const char* baseline;  // the TCP case it is compared with
};

constexpr uint32_t k64 = 64;
constexpr uint32_t k1M = 1u << 20;

constexpr uint32_t kCreditRecvs = 64;  // requester: receives for credit messages
constexpr uint32_t kCreditSq = 64;     // responder: SQ depth for credit messages
constexpr uint64_t kMarkerId = ~0ull;
constexpr int kHardTimeoutExtra = 15;  // seconds beyond the measured interval

// The case named `name`, or nullptr; every case, in the table's order.
const Case* findCase(std::string_view name);
std::span<const Case> cases();

// A failed system call (with errno) or a broken run: a line on stderr, exit 2.
[[noreturn]] void die(const char* what);
[[noreturn]] void dieMsg(const char* what);

// What the responder tells the requester in rdma_accept's private data.
struct AcceptInfo {
  uint32_t version;
  uint32_t credits;
  uint64_t addr;
  uint32_t rkey;
  uint32_t slot;  // bytes per remote slot
  uint32_t slots;
};

struct Result {
  const Case* c = nullptr;
  bool ok = false;
  uint64_t messages = 0;
  double seconds = 0;
  double msgsPerSec() const { return seconds > 0 ? messages / seconds : 0; }
  double mbPerSec() const { return seconds > 0 ? messages * double(c->size) / seconds / 1e6 : 0; }
};

// The responder of an RDMA case: listens on 127.0.0.1, writes its port to
// `ready_fd`, serves one requester for at most `seconds` (plus a margin);
// the process's exit status.
int serveRdma(const Case& c, int ready_fd, int seconds);
// The requester: sends for `seconds` to the responder on `port`; false when
// the run broke (the responder then exits non-zero too).
bool runRdmaClient(const Case& c, uint16_t port, double seconds, Result& r);
// The same for raw TCP loopback.
int serveTcp(int ready_fd);
bool runTcpClient(const Case& c, uint16_t port, double seconds, Result& r);

}  // namespace softrdma_bench
