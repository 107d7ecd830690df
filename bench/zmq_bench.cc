// zmq_bench: the ZeroMQ side of bench/compare.sh and bench/subjects.sh — forwarding proxies,
// stdin/stdout streaming, PUSH/PULL throughput and REQ/REP round trips (compare.sh), and
// XSUB/XPUB proxies with the modes of bench/subjects.sh over PUB/SUB (sub-sink, pub-stream,
// probe, hold-subs: the same JSON result lines as bench/nats_bench.c), for the topology a
// user would otherwise build: app -ipc-> proxy -tcp-> proxy -ipc-> app.
//
// Endpoints follow the CZMQ convention: "@tcp://..." binds, ">ipc://..." connects; without a
// prefix each subcommand uses the natural default given in usage(). A proxy's side may list
// several, separated by commas.
//
// Publish/subscribe: a message is two frames, the subject and the payload (which starts with
// bench/subjects_common.h's header); a subscription is a prefix of the first frame. ZeroMQ
// PUB/SUB confirms nothing, and a PUB or XPUB drops silently what a peer's queue has no room
// for (its high-water mark): the modes take --hwm, and a sub-sink that misses messages says so
// ("complete": false, "dropped": what never arrived) instead of failing.
#include <unistd.h>
#include <zmq.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_set>
#include <vector>

#include "subjects_common.h"

namespace {

constexpr int kDefaultStreamHwm = 100000;
constexpr int kProbeSize = 64;

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
               "       zmq_bench xpub-xsub XSUB XPUB [--hwm H]       XSUB(XSUB, bind) <-> "
               "XPUB(XPUB, bind)\n"
               "publish/subscribe (bench/subjects.sh; each takes [--hwm H]):\n"
               "       zmq_bench sub-sink ENDPOINT --subject S --count N [--subs K]\n"
               "                 [--ready-file F] [--idle-timeout SEC]\n"
               "           K SUB sockets, a context each; each takes N data messages\n"
               "       zmq_bench pub-stream ENDPOINT --subject S --count N --size B\n"
               "                 [--subscriptions K] [--ready-file F --go F] [--timeout SEC]\n"
               "           once the socket heard K subscriptions (default 1), touch the ready\n"
               "           file and wait for the go file; then publish, and close\n"
               "       zmq_bench probe ENDPOINT --subject S --until FILE... [--timeout SEC]\n"
               "           publish probes until the files exist\n"
               "       zmq_bench hold-subs ENDPOINT --subject S --count M [--ready-file F]\n"
               "           hold M subscriptions S.n0 .. S.n<M-1> until SIGTERM; ready once\n"
               "           S.n<M-1> got a probe\n"
               "endpoints: '@' binds, '>' connects; push/pull/req/rep and the publish/subscribe\n"
               "modes connect by default\n");
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
  std::string subject;
  std::string readyFile;
  std::string goFile;
  std::vector<std::string> until;
  long subs = 1;
  long subscriptions = 1;
  long timeoutSec = 30;
  long idleTimeoutSec = 30;
};

Args parseArgs(int argc, char** argv, int first) {
  Args a;
  for (int i = first; i < argc; ++i) {
    std::string_view s = argv[i];
    auto text = [&]() -> std::string {
      if (i + 1 >= argc) std::exit(usage());
      return argv[++i];
    };
    auto value = [&]() -> long { return std::strtol(text().c_str(), nullptr, 10); };
    if (s == "--subject")
      a.subject = text();
    else if (s == "--ready-file")
      a.readyFile = text();
    else if (s == "--go")
      a.goFile = text();
    else if (s == "--until")
      a.until.push_back(text());
    else if (s == "--subs")
      a.subs = value();
    else if (s == "--subscriptions")
      a.subscriptions = value();
    else if (s == "--timeout")
      a.timeoutSec = value();
    else if (s == "--idle-timeout")
      a.idleTimeoutSec = value();
    else if (s == "--size")
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
  ~Zmq() { finish(); }
  Zmq(const Zmq&) = delete;
  Zmq& operator=(const Zmq&) = delete;

  // Closes the sockets and ends the context: returns once the messages they queued left
  // (linger -1, ZeroMQ's default) or were dropped (linger 0).
  void finish() {
    if (ctx_ == nullptr) return;
    for (void* s : sockets_)
      zmq_close(s);
    sockets_.clear();
    while (zmq_ctx_term(ctx_) != 0 && zmq_errno() == EINTR) {
    }
    ctx_ = nullptr;
  }

  // Creates a socket of TYPE attached to ENDPOINTS, separated by commas ('@' bind, '>'
  // connect, else DEFAULTBIND). HWM 0: ZeroMQ's default (1000).
  void* socket(int type, std::string_view endpoints, bool defaultBind, int hwm) {
    void* s = zmq_socket(ctx_, type);
    if (s == nullptr) die("zmq_socket");
    sockets_.push_back(s);
    if (hwm > 0) {
      zmq_setsockopt(s, ZMQ_SNDHWM, &hwm, sizeof hwm);
      zmq_setsockopt(s, ZMQ_RCVHWM, &hwm, sizeof hwm);
    }
    while (!endpoints.empty()) {
      const size_t comma = endpoints.find(',');
      std::string_view endpoint = endpoints.substr(0, comma);
      endpoints = comma == std::string_view::npos ? "" : endpoints.substr(comma + 1);
      bool bind = defaultBind;
      if (!endpoint.empty() && (endpoint[0] == '@' || endpoint[0] == '>')) {
        bind = endpoint[0] == '@';
        endpoint.remove_prefix(1);
      }
      const std::string ep(endpoint);
      if ((bind ? zmq_bind(s, ep.c_str()) : zmq_connect(s, ep.c_str())) != 0)
        die(bind ? "zmq_bind" : "zmq_connect");
    }
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
      "{\"size\": %ld, \"count\": %ld, \"warmup\": %ld, \"p50_us\": %.2f, \"p99_us\": %.2f, "
      "\"p999_us\": %.2f, \"mean_us\": %.2f, \"max_us\": %.2f}\n",
      a.size, a.count, a.warmup, percentile(us, 50), percentile(us, 99), percentile(us, 99.9),
      sum / static_cast<double>(us.size()), us.back());
  return 0;
}

// --- publish/subscribe: the modes of bench/subjects.sh --------------------------------------

// XSUB <-> XPUB: publishers connect to XSUB, subscribers to XPUB. Each XPUB (and PUB) keeps the
// prefixes its peers subscribed to and sends a message only to the peers with a matching one;
// XPUB passes a subscription up (to XSUB, and on to the publishers) the first time it hears it.
int xpubXsub(const Args& a) {
  if (a.positional.size() != 2) return usage();
  Zmq z;
  void* xsub = z.socket(ZMQ_XSUB, a.positional[0], true, a.hwm);
  void* xpub = z.socket(ZMQ_XPUB, a.positional[1], true, a.hwm);
  int linger = 0;
  zmq_setsockopt(xsub, ZMQ_LINGER, &linger, sizeof linger);
  zmq_setsockopt(xpub, ZMQ_LINGER, &linger, sizeof linger);
  zmq_proxy(xsub, xpub, nullptr);
  return 0;
}

void touch(const std::string& path) {
  if (path.empty()) return;
  if (FILE* f = std::fopen(path.c_str(), "w")) std::fclose(f);
}

bool exists(const std::string& path) {
  return access(path.c_str(), F_OK) == 0;
}

void sleepUs(long us) {
  std::this_thread::sleep_for(std::chrono::microseconds(us));
}

// One message: the subject frame, then the payload frame.
void sendMessage(void* s, const std::string& subject, const void* payload, size_t size) {
  while (zmq_send(s, subject.data(), subject.size(), ZMQ_SNDMORE) < 0)
    if (zmq_errno() != EINTR) die("zmq_send");
  while (zmq_send(s, payload, size, 0) < 0)
    if (zmq_errno() != EINTR) die("zmq_send");
}

// Receives one message (both frames) into PAYLOAD; false when nothing came within the
// socket's receive timeout.
bool receiveMessage(void* s, zmq_msg_t& subject, zmq_msg_t& payload) {
  while (zmq_msg_recv(&subject, s, 0) < 0) {
    if (zmq_errno() == EAGAIN) return false;
    if (zmq_errno() != EINTR) die("zmq_msg_recv");
  }
  if (!zmq_msg_more(&subject)) die("a message of one frame");
  while (zmq_msg_recv(&payload, s, 0) < 0)
    if (zmq_errno() != EINTR) die("zmq_msg_recv");
  return true;
}

void setInt(void* s, int option, int value) {
  if (zmq_setsockopt(s, option, &value, sizeof value) != 0) die("zmq_setsockopt");
}

// --- sub-sink

struct Sink {
  sb_stream stream{};
  std::thread thread;
};

std::mutex readyLock;
std::condition_variable readyCond;
long readyCount = 0;

void markReady() {
  std::lock_guard lock(readyLock);
  readyCount++;
  readyCond.notify_all();
}

// One subscriber: a context of its own (one I/O thread), as a separate application has.
// It ends once it took N data messages or after --idle-timeout seconds without one.
void sinkMain(const Args& a, Sink& k) {
  Zmq z;
  void* s = z.socket(ZMQ_SUB, a.positional[0], false, a.hwm);
  setInt(s, ZMQ_LINGER, 0);
  setInt(s, ZMQ_RCVTIMEO, 100);
  if (zmq_setsockopt(s, ZMQ_SUBSCRIBE, a.subject.data(), a.subject.size()) != 0)
    die("zmq_setsockopt(ZMQ_SUBSCRIBE)");
  sb_stream_init(&k.stream);
  zmq_msg_t subject, payload;
  zmq_msg_init(&subject);
  zmq_msg_init(&payload);
  uint64_t lastEvent = sb_now_ns();
  while (k.stream.received < static_cast<uint64_t>(a.count)) {
    if (!receiveMessage(s, subject, payload)) {
      if (sb_now_ns() - lastEvent > static_cast<uint64_t>(a.idleTimeoutSec) * 1000000000ull) break;
      continue;
    }
    const uint64_t probesBefore = k.stream.probes;
    sb_stream_take(&k.stream, zmq_msg_data(&payload), zmq_msg_size(&payload));
    if (probesBefore == 0 && k.stream.probes == 1) markReady();
    lastEvent = k.stream.lastNs ? k.stream.lastNs : sb_now_ns();
  }
  zmq_msg_close(&subject);
  zmq_msg_close(&payload);
}

int subSink(const Args& a) {
  if (a.positional.size() != 1 || a.subject.empty() || a.count <= 0 || a.subs <= 0) return usage();
  std::vector<Sink> sinks(static_cast<size_t>(a.subs));
  for (Sink& k : sinks)
    k.thread = std::thread(sinkMain, std::cref(a), std::ref(k));
  // Ready once every subscriber took a probe: the proxies on the way pass the subject to it.
  bool ready;
  {
    std::unique_lock lock(readyLock);
    ready = readyCond.wait_for(lock, std::chrono::seconds(a.idleTimeoutSec),
                               [&] { return readyCount == a.subs; });
  }
  if (ready) touch(a.readyFile);
  for (Sink& k : sinks)
    k.thread.join();
  uint64_t received = 0, bytesIn = 0, outOfOrder = 0, gaps = 0, start = UINT64_MAX, last = 0;
  bool complete = true;
  for (const Sink& k : sinks) {
    received += k.stream.received;
    bytesIn += k.stream.bytes;
    outOfOrder += k.stream.outOfOrder;
    gaps += k.stream.gaps;
    if (k.stream.received && k.stream.firstStartNs < start) start = k.stream.firstStartNs;
    if (k.stream.lastNs > last) last = k.stream.lastNs;
    if (k.stream.received < static_cast<uint64_t>(a.count)) complete = false;
  }
  // ZeroMQ does not tell what it dropped: "dropped" is what never arrived.
  const uint64_t expected = static_cast<uint64_t>(a.count) * sinks.size();
  const double n = static_cast<double>(sinks.size());
  const double secs = received && last > start ? static_cast<double>(last - start) / 1e9 : 0;
  const double perSub = static_cast<double>(received) / n;
  const long size = received ? static_cast<long>(bytesIn / received) : a.size;
  std::printf(
      "{\"system\": \"zmq\", \"mode\": \"sub-sink\", \"subs\": %zu, \"size\": %ld, "
      "\"count\": %ld, \"received\": %lu, \"complete\": %s, \"seconds\": %.6f, "
      "\"msgs_per_sec\": %.1f, \"deliveries_per_sec\": %.1f, \"mb_per_sec\": %.2f, "
      "\"out_of_order\": %lu, \"gaps\": %lu, \"dropped\": %lu, \"hwm\": %d}\n",
      sinks.size(), size, a.count, static_cast<unsigned long>(received),
      complete ? "true" : "false", secs, secs > 0 ? perSub / secs : 0,
      secs > 0 ? static_cast<double>(received) / secs : 0,
      secs > 0 ? static_cast<double>(bytesIn) / n / 1e6 / secs : 0,
      static_cast<unsigned long>(outOfOrder), static_cast<unsigned long>(gaps),
      static_cast<unsigned long>(expected - std::min(received, expected)), a.hwm);
  // A loss is a result, reported above; only a stream that never started is a failure.
  return received > 0 ? 0 : 1;
}

// --- pub-stream

// An XPUB rather than a PUB: the same sending path and the same filters, but it shows the
// subscriptions it hears. A PUB drops what no subscription it heard matches, and hears the
// subscriptions only after it connected (the slow joiner): the stream starts once the socket
// heard --subscriptions distinct ones (all of the case's, passed up by the proxy's XSUB).
int pubStream(const Args& a) {
  if (a.positional.size() != 1 || a.subject.empty() || a.count <= 0 || a.size < SB_HEADER ||
      a.goFile.empty() != a.readyFile.empty())
    return usage();
  Zmq z;
  void* s = z.socket(ZMQ_XPUB, a.positional[0], false, a.hwm);
  setInt(s, ZMQ_RCVTIMEO, 100);
  const uint64_t deadline = sb_now_ns() + static_cast<uint64_t>(a.timeoutSec) * 1000000000ull;
  std::unordered_set<std::string> heard;
  zmq_msg_t msg;
  zmq_msg_init(&msg);
  while (static_cast<long>(heard.size()) < a.subscriptions) {
    if (sb_now_ns() > deadline) {
      std::fprintf(stderr, "zmq_bench: pub-stream: heard %zu of %ld subscriptions in %ld s\n",
                   heard.size(), a.subscriptions, a.timeoutSec);
      return 1;
    }
    if (zmq_msg_recv(&msg, s, 0) < 0) {
      if (zmq_errno() == EAGAIN || zmq_errno() == EINTR) continue;
      die("zmq_msg_recv");
    }
    const auto* d = static_cast<const char*>(zmq_msg_data(&msg));
    const size_t len = zmq_msg_size(&msg);
    if (len == 0) continue;
    if (d[0] == 1)
      heard.emplace(d + 1, len - 1);
    else if (d[0] == 0)
      heard.erase(std::string(d + 1, len - 1));
  }
  zmq_msg_close(&msg);
  if (!a.readyFile.empty()) {  // the caller starts its measurement, then says go
    touch(a.readyFile);
    while (!exists(a.goFile)) {
      if (sb_now_ns() > deadline) {
        std::fprintf(stderr, "zmq_bench: pub-stream: no %s in %ld s\n", a.goFile.c_str(),
                     a.timeoutSec);
        return 1;
      }
      sleepUs(100);
    }
  }
  std::vector<char> buf(static_cast<size_t>(a.size), 'x');
  sb_header h{SB_KIND_DATA, 0, 0, sb_now_ns()};
  const uint64_t t0 = h.startNs;
  for (long i = 0; i < a.count; ++i) {
    h.seq = static_cast<uint64_t>(i);
    sb_put(buf.data(), &h);
    sendMessage(s, a.subject, buf.data(), buf.size());
  }
  z.finish();  // until every queued message was written to the proxy
  const double secs = static_cast<double>(sb_now_ns() - t0) / 1e9;
  std::printf(
      "{\"system\": \"zmq\", \"mode\": \"pub-stream\", \"size\": %ld, \"count\": %ld, "
      "\"seconds\": %.6f, \"msgs_per_sec\": %.1f, \"mb_per_sec\": %.2f, \"window\": null, "
      "\"confirmed\": false, \"matched\": null, \"taken\": null, \"dropped\": null, "
      "\"no_subscribers\": null, \"errors\": 0, \"subscriptions\": %zu, \"hwm\": %d}\n",
      a.size, a.count, secs, static_cast<double>(a.count) / secs,
      static_cast<double>(a.count) * static_cast<double>(a.size) / 1e6 / secs, heard.size(), a.hwm);
  return 0;
}

// --- probe

int probe(const Args& a) {
  if (a.positional.size() != 1 || a.subject.empty() || a.until.empty()) return usage();
  Zmq z;
  void* s = z.socket(ZMQ_PUB, a.positional[0], false, a.hwm);
  setInt(s, ZMQ_LINGER, 0);
  char buf[kProbeSize] = {};
  sb_header h{SB_KIND_PROBE, 0, 0, sb_now_ns()};
  const uint64_t deadline = h.startNs + static_cast<uint64_t>(a.timeoutSec) * 1000000000ull;
  for (;;) {
    if (std::all_of(a.until.begin(), a.until.end(), exists)) return 0;
    if (sb_now_ns() > deadline) {
      std::fprintf(stderr, "zmq_bench: probe: no answer on %s within %ld s\n", a.subject.c_str(),
                   a.timeoutSec);
      return 1;
    }
    sb_put(buf, &h);
    h.seq++;
    sendMessage(s, a.subject, buf, sizeof buf);
    sleepUs(2000);  // the pace of the probes, not a synchronisation
  }
}

// --- hold-subs

int holdSubs(const Args& a) {
  if (a.positional.size() != 1 || a.subject.empty() || a.count <= 0) return usage();
  Zmq z;
  void* s = z.socket(ZMQ_SUB, a.positional[0], false, a.hwm);
  setInt(s, ZMQ_LINGER, 0);
  setInt(s, ZMQ_RCVTIMEO, 100);
  const uint64_t t0 = sb_now_ns();
  std::string name;
  for (long i = 0; i < a.count; ++i) {
    name = a.subject + ".n" + std::to_string(i);
    if (zmq_setsockopt(s, ZMQ_SUBSCRIBE, name.data(), name.size()) != 0)
      die("zmq_setsockopt(ZMQ_SUBSCRIBE)");
  }
  const double setup = static_cast<double>(sb_now_ns() - t0) / 1e9;
  // One connection carries the subscriptions in order: once a probe reaches the last one, the
  // proxy has heard all of them.
  zmq_msg_t subject, payload;
  zmq_msg_init(&subject);
  zmq_msg_init(&payload);
  while (!receiveMessage(s, subject, payload) ||
         std::string_view(static_cast<const char*>(zmq_msg_data(&subject)),
                          zmq_msg_size(&subject)) != name) {
  }
  std::printf(
      "{\"system\": \"zmq\", \"mode\": \"hold-subs\", \"subscriptions\": %ld, "
      "\"setup_seconds\": %.3f, \"ready_seconds\": %.3f}\n",
      a.count, setup, static_cast<double>(sb_now_ns() - t0) / 1e9);
  std::fflush(stdout);
  touch(a.readyFile);
  for (;;)
    pause();  // until SIGTERM
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
  if (cmd == "xpub-xsub") return xpubXsub(a);
  if (cmd == "sub-sink") return subSink(a);
  if (cmd == "pub-stream") return pubStream(a);
  if (cmd == "probe") return probe(a);
  if (cmd == "hold-subs") return holdSubs(a);
  return usage();
}
