// softrdma-bench: measures softrdma's data path between two processes on
// 127.0.0.1 and compares it with raw TCP loopback measured in the same run.
//
// The parent process is the requester (client) of every case; for each case
// it starts a fresh copy of itself (fork + exec, "--serve CASE") as the
// responder (server), which reports its listening port through a pipe. The
// RDMA cases are plain rdma-core code (rdma_cm + verbs): receives pre-posted,
// credit-based flow control (the responder returns credits with zero-length
// SEND_WITH_IMM after reposting a batch of receives), selective signalling,
// post lists, and event-driven completion (comp channel + epoll,
// poll → arm → poll → wait) or busy polling. A case ends with a zero-length
// SEND_WITH_IMM marker carrying the number of messages sent; the responder
// checks it and the sequence numbers in the payloads, and exits non-zero on
// a mismatch.
#include <arpa/inet.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bench.h"

namespace softrdma_bench {

// clang-format off
const Case kCases[] = {
  {"send64-post1-event",  Transport::Send,  k64, 1,  Wait::Event, 512, 32, 1024, 32, "tcp64-write1"},
  {"send64-post16-event", Transport::Send,  k64, 16, Wait::Event, 512, 32, 1024, 32, "tcp64-write16"},
  {"send64-post1-busy",   Transport::Send,  k64, 1,  Wait::Busy,  512, 32, 1024, 32, "tcp64-write1"},
  {"send64-post16-busy",  Transport::Send,  k64, 16, Wait::Busy,  512, 32, 1024, 32, "tcp64-write16"},
  {"send1M-event",        Transport::Send,  k1M, 1,  Wait::Event, 16,  4,  16,   4,  "tcp1M"},
  {"write1M-event",       Transport::Write, k1M, 1,  Wait::Event, 16,  4,  16,   4,  "tcp1M"},
  {"tcp64-write1",        Transport::Tcp,   k64, 1,  Wait::Event, 0,   0,  0,    0,  nullptr},
  {"tcp64-write16",       Transport::Tcp,   k64, 16, Wait::Event, 0,   0,  0,    0,  nullptr},
  {"tcp1M",               Transport::Tcp,   k1M, 1,  Wait::Event, 0,   0,  0,    0,  nullptr},
};
// clang-format on

const Case* findCase(std::string_view name) {
  for (const Case& c : kCases)
    if (name == c.name) return &c;
  return nullptr;
}

std::span<const Case> cases() {
  return kCases;
}

[[noreturn]] void die(const char* what) {
  fprintf(stderr, "softrdma-bench[%d]: %s: %s\n", getpid(), what, strerror(errno));
  exit(2);
}

[[noreturn]] void dieMsg(const char* what) {
  fprintf(stderr, "softrdma-bench[%d]: %s\n", getpid(), what);
  exit(2);
}

}  // namespace softrdma_bench

namespace {

using namespace softrdma_bench;

// ------------------------------------------------------------ processes

// The responder process of one case; killed and reaped if still running
// when this goes out of scope.
class Child {
 public:
  Child(const Case& c, double seconds) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) die("pipe");
    std::string secs = std::to_string(static_cast<int>(seconds + 1));
    std::string fd = std::to_string(p[1]);
    const char* argv[] = {"softrdma-bench", "--serve", c.name, fd.c_str(), secs.c_str(), nullptr};
    pid_t parent = getpid();
    pid_ = fork();
    if (pid_ < 0) die("fork");
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(1);
      fcntl(p[1], F_SETFD, 0);
      execv("/proc/self/exe", const_cast<char* const*>(argv));
      _exit(127);
    }
    close(p[1]);
    pollfd pf{p[0], POLLIN, 0};
    if (poll(&pf, 1, 10000) == 1 && read(p[0], &port_, sizeof port_) == sizeof port_) ready_ = true;
    close(p[0]);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  bool ready() const { return ready_; }
  uint16_t port() const { return port_; }

  // Waits up to `timeout_ms` for a clean exit.
  bool exitedOk(int timeout_ms) {
    auto until = Clock::now() + std::chrono::milliseconds(timeout_ms);
    while (Clock::now() < until) {
      int st = 0;
      pid_t r = waitpid(pid_, &st, WNOHANG);
      if (r == pid_) {
        reaped_ = true;
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return true;
        fprintf(stderr, "softrdma-bench: responder exited with status %d\n",
                WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    fprintf(stderr, "softrdma-bench: responder did not exit, killing it\n");
    return false;
  }

 private:
  pid_t pid_ = -1;
  uint16_t port_ = 0;
  bool ready_ = false;
  bool reaped_ = false;
};

Result runCase(const Case& c, double seconds) {
  Result r;
  r.c = &c;
  Child child(c, seconds);
  if (!child.ready()) {
    fprintf(stderr, "softrdma-bench: %s: responder did not start\n", c.name);
    return r;
  }
  bool ok = c.transport == Transport::Tcp ? runTcpClient(c, child.port(), seconds, r)
                                          : runRdmaClient(c, child.port(), seconds, r);
  bool child_ok = child.exitedOk(5000);
  r.ok = ok && child_ok;
  if (!ok) fprintf(stderr, "softrdma-bench: %s: requester failed\n", c.name);
  return r;
}

// ------------------------------------------------------------ output

const Result* findResult(const std::vector<Result>& rs, const char* name) {
  for (const Result& r : rs)
    if (name != nullptr && std::string_view(r.c->name) == name) return &r;
  return nullptr;
}

double ratio(const Result& r, const std::vector<Result>& rs) {
  const Result* b = findResult(rs, r.c->baseline);
  if (b == nullptr || !b->ok || !r.ok || b->msgsPerSec() == 0) return 0;
  return r.msgsPerSec() / b->msgsPerSec();
}

void printTable(const std::vector<Result>& rs) {
  printf("%-22s %8s %5s %6s %12s %10s %9s  %s\n", "case", "size", "post", "wait", "msgs/s", "MB/s",
         "ratio", "vs");
  for (const Result& r : rs) {
    const Case& c = *r.c;
    const char* wait = c.transport == Transport::Tcp ? "-"
                       : c.wait == Wait::Event       ? "event"
                                                     : "busy";
    if (!r.ok) {
      printf("%-22s %8u %5d %6s %12s\n", c.name, c.size, c.batch, wait, "FAILED");
      continue;
    }
    printf("%-22s %8u %5d %6s %12.0f %10.1f ", c.name, c.size, c.batch, wait, r.msgsPerSec(),
           r.mbPerSec());
    if (c.baseline != nullptr)
      printf("%9.2f  %s\n", ratio(r, rs), c.baseline);
    else
      printf("%9s\n", "-");
  }
  printf("(MB = 10^6 bytes; ratio = softrdma / raw TCP loopback, same size and batching)\n");
}

void printJson(const std::vector<Result>& rs, double seconds) {
  printf("{\"seconds_per_case\": %.3f, \"cases\": [\n", seconds);
  for (size_t i = 0; i < rs.size(); i++) {
    const Result& r = rs[i];
    const Case& c = *r.c;
    printf(
        "  {\"name\": \"%s\", \"transport\": \"%s\", \"size\": %u, \"batch\": %d, \"wait\": "
        "\"%s\", \"ok\": %s, \"messages\": %llu, \"seconds\": %.6f, \"msgs_per_s\": %.1f, "
        "\"mb_per_s\": %.3f, \"baseline\": %s%s%s, \"ratio\": %.4f}%s\n",
        c.name,
        c.transport == Transport::Tcp    ? "tcp"
        : c.transport == Transport::Send ? "send"
                                         : "write",
        c.size, c.batch, c.wait == Wait::Event ? "event" : "busy", r.ok ? "true" : "false",
        static_cast<unsigned long long>(r.messages), r.seconds, r.msgsPerSec(), r.mbPerSec(),
        c.baseline ? "\"" : "", c.baseline ? c.baseline : "null", c.baseline ? "\"" : "",
        ratio(r, rs), i + 1 < rs.size() ? "," : "");
  }
  printf("]}\n");
}

void usage() {
  fprintf(stderr,
          "usage: softrdma-bench [--seconds S] [--json] [--no-busy] [--only NAME[,NAME...]]\n"
          "Measures softrdma (RDMA over TCP) between two processes on 127.0.0.1 and raw\n"
          "TCP loopback with the same message sizes; prints messages/s, MB/s and ratios.\n"
          "cases:");
  for (const Case& c : kCases)
    fprintf(stderr, " %s", c.name);
  fprintf(stderr, "\n");
}

bool selected(const Case& c, const std::string& only, bool busy) {
  if (!busy && c.wait == Wait::Busy) return false;
  if (only.empty()) return true;
  std::string list = "," + only + ",";
  return list.find(std::string(",") + c.name + ",") != std::string::npos;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 5 && std::string_view(argv[1]) == "--serve") {
    const Case* c = findCase(argv[2]);
    if (c == nullptr) dieMsg("unknown case");
    int seconds = atoi(argv[4]);
    alarm(static_cast<unsigned>(seconds + 2 * kHardTimeoutExtra));  // never outlive a run
    int fd = atoi(argv[3]);
    return c->transport == Transport::Tcp ? serveTcp(fd) : serveRdma(*c, fd, seconds);
  }
  double seconds = 2.0;
  bool json = false, busy = true;
  std::string only;
  for (int i = 1; i < argc; i++) {
    std::string_view a = argv[i];
    if (a == "--seconds" && i + 1 < argc) {
      seconds = atof(argv[++i]);
    } else if (a == "--json") {
      json = true;
    } else if (a == "--no-busy") {
      busy = false;
    } else if (a == "--only" && i + 1 < argc) {
      only = argv[++i];
    } else {
      usage();
      return a == "-h" || a == "--help" ? 0 : 2;
    }
  }
  if (seconds <= 0 || seconds > 5) {
    fprintf(stderr, "softrdma-bench: --seconds must be in (0, 5]\n");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  std::vector<Result> results;
  for (const Case& c : kCases) {
    if (!selected(c, only, busy)) continue;
    results.push_back(runCase(c, seconds));
    if (!json) fprintf(stderr, "  %s done\n", c.name);
  }
  if (json)
    printJson(results, seconds);
  else
    printTable(results);
  for (const Result& r : results)
    if (!r.ok) return 1;
  return 0;
}
