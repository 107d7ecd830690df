// zmq_bench: the ZeroMQ side of bench/compare.sh — forwarding proxies, stdin/stdout
// streaming, PUSH/PULL throughput and REQ/REP round trips, for the topology a user would
// otherwise build: app -ipc-> proxy -tcp-> proxy -ipc-> app.
//
// Endpoints follow the CZMQ convention: "@tcp://..." binds, ">ipc://..." connects; without a
// prefix each subcommand uses the natural default given in usage().
#include <zmq.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <string_view>
#include <vector>

namespace {

constexpr int kDefaultStreamHwm = 100000;

int usage() {
  std::fprintf(stderr,
               "usage: zmq_bench proxy-stream IN OUT [--hwm H]     PULL(IN, bind) -> PUSH(OUT, "
               "connect)\n"
               "       zmq_bench router-dealer FRONT BACK          ROUTER(FRONT, bind) <-> "
               "DEALER(BACK, connect)\n"
               "       zmq_bench push-stdin ENDPOINT [--hwm H]     each stdin line is one message\n"
               "       zmq_bench pull-stdout ENDPOINT --count N [--hwm H]\n"
               "       zmq_bench push ENDPOINT --size S --count N [--hwm H]\n"
               "       zmq_bench pull ENDPOINT --size S --count N [--hwm H]\n"
               "       zmq_bench rep ENDPOINT                      echo until SIGTERM\n"
               "       zmq_bench req ENDPOINT --size S --count N [--warmup W]\n"
               "endpoints: '@' binds, '>' connects; push/pull/req/rep connect by default\n");
  return 2;
}

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "zmq_bench: %s: %s\n", what, zmq_strerror(zmq_errno()));
  std::exit(1);
}

uint64_t nowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

struct Args {
  std::vector<std::string> positional;
  long size = 64;
  long count = 0;
  long warmup = 1000;
  int hwm = kDefaultStreamHwm;
};

Args parseArgs(int argc, char** argv, int first) {
  Args a;
  for (int i = first; i < argc; ++i) {
    std::string_view s = argv[i];
    auto value = [&]() -> long {
      if (i + 1 >= argc) std::exit(usage());
      return std::strtol(argv[++i], nullptr, 10);
    };
    if (s == "--size")
      a.size = value();
    else if (s == "--count")
      a.count = value();
    else if (s == "--warmup")
      a.warmup = value();
    else if (s == "--hwm")
      a.hwm = static_cast<int>(value());
    else
      a.positional.emplace_back(s);
  }
  return a;
}

// One context and its sockets; zmq_ctx_term waits for queued messages to go out (linger -1).
class Zmq {
 public:
  Zmq() : ctx_(zmq_ctx_new()) {
    if (ctx_ == nullptr) die("zmq_ctx_new");
  }
  ~Zmq() {
    for (void* s : sockets_)
      zmq_close(s);
    while (zmq_ctx_term(ctx_) != 0 && zmq_errno() == EINTR) {
    }
  }
  Zmq(const Zmq&) = delete;
  Zmq& operator=(const Zmq&) = delete;

  // Creates a socket of TYPE attached to ENDPOINT ('@' bind, '>' connect, else DEFAULTBIND).
  void* socket(int type, std::string_view endpoint, bool defaultBind, int hwm) {
    void* s = zmq_socket(ctx_, type);
    if (s == nullptr) die("zmq_socket");
    sockets_.push_back(s);
    if (hwm > 0) {
      zmq_setsockopt(s, ZMQ_SNDHWM, &hwm, sizeof hwm);
      zmq_setsockopt(s, ZMQ_RCVHWM, &hwm, sizeof hwm);
    }
    bool bind = defaultBind;
    if (!endpoint.empty() && (endpoint[0] == '@' || endpoint[0] == '>')) {
      bind = endpoint[0] == '@';
      endpoint.remove_prefix(1);
    }
    const std::string ep(endpoint);
    if ((bind ? zmq_bind(s, ep.c_str()) : zmq_connect(s, ep.c_str())) != 0)
      die(bind ? "zmq_bind" : "zmq_connect");
    return s;
  }

 private:
  void* ctx_;
  std::vector<void*> sockets_;
};

// Proxies and the echo run until SIGTERM, whose default action ends them: a handler would
// race with ZeroMQ's blocking calls (a signal between two calls is not an EINTR).
int proxyStream(const Args& a) {
  if (a.positional.size() != 2) return usage();
  Zmq z;
  void* in = z.socket(ZMQ_PULL, a.positional[0], true, a.hwm);
  void* out = z.socket(ZMQ_PUSH, a.positional[1], false, a.hwm);
  int linger = 0;
  zmq_setsockopt(out, ZMQ_LINGER, &linger, sizeof linger);
  zmq_setsockopt(in, ZMQ_LINGER, &linger, sizeof linger);
  zmq_proxy(in, out, nullptr);
  return 0;
}

int routerDealer(const Args& a) {
  if (a.positional.size() != 2) return usage();
  Zmq z;
  void* front = z.socket(ZMQ_ROUTER, a.positional[0], true, 0);
  void* back = z.socket(ZMQ_DEALER, a.positional[1], false, 0);
  int linger = 0;
  zmq_setsockopt(front, ZMQ_LINGER, &linger, sizeof linger);
  zmq_setsockopt(back, ZMQ_LINGER, &linger, sizeof linger);
  zmq_proxy(front, back, nullptr);
  return 0;
}

int pushStdin(const Args& a) {
  if (a.positional.size() != 1) return usage();
  Zmq z;
  void* push = z.socket(ZMQ_PUSH, a.positional[0], false, a.hwm);
  std::setvbuf(stdin, nullptr, _IOFBF, 1 << 16);
  char* line = nullptr;
  size_t cap = 0;
  ssize_t n;
  while ((n = getline(&line, &cap, stdin)) > 0) {
    if (line[n - 1] == '\n') --n;
    while (zmq_send(push, line, static_cast<size_t>(n), 0) < 0)
      if (zmq_errno() != EINTR) die("zmq_send");
  }
  std::free(line);
  return 0;  // ~Zmq lingers until every message left
}

int pullStdout(const Args& a) {
  if (a.positional.size() != 1 || a.count <= 0) return usage();
  Zmq z;
  void* pull = z.socket(ZMQ_PULL, a.positional[0], false, a.hwm);
  std::setvbuf(stdout, nullptr, _IOFBF, 1 << 16);
  zmq_msg_t msg;
  zmq_msg_init(&msg);
  for (long i = 0; i < a.count; ++i) {
    if (zmq_msg_recv(&msg, pull, 0) < 0) die("zmq_msg_recv");
    std::fwrite(zmq_msg_data(&msg), 1, zmq_msg_size(&msg), stdout);
    std::fputc('\n', stdout);
  }
  zmq_msg_close(&msg);
  std::fflush(stdout);
  return 0;
}

// PUSH: every message carries the sender's CLOCK_MONOTONIC start time in its first 8 bytes,
// so the receiver measures from the first send to the last delivery (same machine).
int push(const Args& a) {
  if (a.positional.size() != 1 || a.count <= 0 || a.size < 8) return usage();
  Zmq z;
  void* s = z.socket(ZMQ_PUSH, a.positional[0], false, a.hwm);
  std::vector<char> buf(static_cast<size_t>(a.size), 'x');
  const uint64_t start = nowNs();
  std::memcpy(buf.data(), &start, sizeof start);
  for (long i = 0; i < a.count; ++i)
    while (zmq_send(s, buf.data(), buf.size(), 0) < 0)
      if (zmq_errno() != EINTR) die("zmq_send");
  return 0;
}

int pull(const Args& a) {
  if (a.positional.size() != 1 || a.count <= 0) return usage();
  Zmq z;
  void* s = z.socket(ZMQ_PULL, a.positional[0], false, a.hwm);
  zmq_msg_t msg;
  zmq_msg_init(&msg);
  uint64_t start = 0;
  uint64_t bytes = 0;
  for (long i = 0; i < a.count; ++i) {
    if (zmq_msg_recv(&msg, s, 0) < 0) die("zmq_msg_recv");
    if (i == 0 && zmq_msg_size(&msg) >= 8) std::memcpy(&start, zmq_msg_data(&msg), 8);
    bytes += zmq_msg_size(&msg);
  }
  const double secs = static_cast<double>(nowNs() - start) / 1e9;
  zmq_msg_close(&msg);
  std::printf(
      "{\"size\": %ld, \"count\": %ld, \"seconds\": %.6f, \"msgs_per_sec\": %.1f, "
      "\"mb_per_sec\": %.2f}\n",
      a.size, a.count, secs, static_cast<double>(a.count) / secs,
      static_cast<double>(bytes) / 1e6 / secs);
  return 0;
}

int rep(const Args& a) {
  if (a.positional.size() != 1) return usage();
  Zmq z;
  void* s = z.socket(ZMQ_REP, a.positional[0], false, 0);
  int linger = 0;
  zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
  zmq_msg_t msg;
  zmq_msg_init(&msg);
  for (long i = 0; a.count == 0 || i < a.count; ++i) {
    if (zmq_msg_recv(&msg, s, 0) < 0) break;  // EINTR: stopped
    if (zmq_msg_send(&msg, s, 0) < 0) break;
  }
  zmq_msg_close(&msg);
  return 0;
}

double percentile(const std::vector<double>& sorted, double p) {
  const auto i = static_cast<size_t>(p / 100.0 * static_cast<double>(sorted.size() - 1) + 0.5);
  return sorted[std::min(i, sorted.size() - 1)];
}

int req(const Args& a) {
  if (a.positional.size() != 1 || a.count <= 0 || a.size <= 0) return usage();
  Zmq z;
  void* s = z.socket(ZMQ_REQ, a.positional[0], false, 0);
  int timeoutMs = 10000;  // a lost reply ends the run instead of hanging it
  zmq_setsockopt(s, ZMQ_RCVTIMEO, &timeoutMs, sizeof timeoutMs);
  int linger = 0;
  zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
  std::vector<char> buf(static_cast<size_t>(a.size), 'x');
  std::vector<double> us;
  us.reserve(static_cast<size_t>(a.count));
  zmq_msg_t reply;
  zmq_msg_init(&reply);
  for (long i = 0; i < a.warmup + a.count; ++i) {
    const uint64_t t0 = nowNs();
    if (zmq_send(s, buf.data(), buf.size(), 0) < 0) die("zmq_send");
    if (zmq_msg_recv(&reply, s, 0) < 0) die("zmq_msg_recv");
    const uint64_t t1 = nowNs();
    if (i >= a.warmup) us.push_back(static_cast<double>(t1 - t0) / 1e3);
  }
  zmq_msg_close(&reply);
  double sum = 0;
  for (double v : us)
    sum += v;
  std::sort(us.begin(), us.end());
  std::printf(
      "{\"size\": %ld, \"count\": %ld, \"p50_us\": %.2f, \"p99_us\": %.2f, \"p999_us\": %.2f, "
      "\"mean_us\": %.2f, \"max_us\": %.2f}\n",
      a.size, a.count, percentile(us, 50), percentile(us, 99), percentile(us, 99.9),
      sum / static_cast<double>(us.size()), us.back());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  const std::string_view cmd = argv[1];
  const Args a = parseArgs(argc, argv, 2);
  if (cmd == "proxy-stream") return proxyStream(a);
  if (cmd == "router-dealer") return routerDealer(a);
  if (cmd == "push-stdin") return pushStdin(a);
  if (cmd == "pull-stdout") return pullStdout(a);
  if (cmd == "push") return push(a);
  if (cmd == "pull") return pull(a);
  if (cmd == "rep") return rep(a);
  if (cmd == "req") return req(a);
  return usage();
}
