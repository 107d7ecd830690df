// subjects_bench: the rdmamsg side of bench/subjects.sh — the same modes and the same JSON
// result lines as bench/nats_bench.c, with librdmamsg's subjects against rdmamsgd.
//
// A publish is confirmed end to end: its completion comes once every subscription it matched
// took it (or dropped it, counted). pub-stream keeps at most --window publishes unconfirmed;
// with a window no larger than the subscriptions' pending limit (the daemon's pending_limit,
// 65536) a subscriber that keeps up drops nothing.
#include <pthread.h>
#include <rdmamsg/client.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "subjects_common.h"

namespace {

using namespace std::chrono_literals;
using rdmamsg::Client;

int usage() {
  std::fprintf(
      stderr,
      "usage: subjects_bench MODE --socket PATH [options]\n"
      "  sub-sink --subject S --count N [--subs K] [--ready-file F] [--idle-timeout SEC]\n"
      "      K clients, one subscription each; each takes N data messages\n"
      "  pub-stream --subject S --count N --size B [--id P] [--window W]\n"
      "      publish, at most W unconfirmed (default 65536), until every one is confirmed\n"
      "  probe --subject S --until FILE... [--timeout SEC]    publish probes until the files "
      "exist\n"
      "  reply-echo --subject S [--ready-file F]              answer requests until SIGTERM\n"
      "  request-latency --subject S --count N --size B [--warmup W]\n"
      "  hold-subs --subject S --count M [--ready-file F]     hold M subscriptions S.n0 .. "
      "S.n<M-1>\n"
      "      until SIGTERM; ready once S.n<M-1> got a probe\n"
      "  [--idle sleep|adaptive|busy]: the clients' idle strategy (default: the library's)\n");
  return 2;
}

struct Args {
  std::string mode;
  std::string socket;
  std::string subject;
  std::string readyFile;
  std::vector<std::string> until;
  long count = 0;
  long size = 64;
  long subs = 1;
  long id = 0;
  long warmup = 1000;
  long window = 65536;
  long timeoutSec = 30;
  long idleTimeoutSec = 30;
  std::string idle;
};

bool parse(int argc, char** argv, Args& a) {
  if (argc < 2) return false;
  a.mode = argv[1];
  for (int i = 2; i < argc; i++) {
    const std::string_view k = argv[i];
    if (i + 1 >= argc) return false;
    const char* v = argv[++i];
    auto num = [&] { return std::strtol(v, nullptr, 10); };
    if (k == "--socket")
      a.socket = v;
    else if (k == "--subject")
      a.subject = v;
    else if (k == "--ready-file")
      a.readyFile = v;
    else if (k == "--until")
      a.until.emplace_back(v);
    else if (k == "--count")
      a.count = num();
    else if (k == "--size")
      a.size = num();
    else if (k == "--subs")
      a.subs = num();
    else if (k == "--id")
      a.id = num();
    else if (k == "--warmup")
      a.warmup = num();
    else if (k == "--window")
      a.window = num();
    else if (k == "--timeout")
      a.timeoutSec = num();
    else if (k == "--idle-timeout")
      a.idleTimeoutSec = num();
    else if (k == "--idle")
      a.idle = v;
    else
      return false;
  }
  return !a.socket.empty() && !a.subject.empty();
}

[[noreturn]] void die(std::string_view what, const rdmamsg::Status& s) {
  std::fprintf(stderr, "subjects_bench: %.*s: %s\n", static_cast<int>(what.size()), what.data(),
               s.toString().c_str());
  std::exit(1);
}

// SIGTERM and SIGINT are blocked in every thread and taken with sigtimedwait by the loops
// that run until stopped.
sigset_t stopSignals;
bool stopRequested(long waitMs) {
  timespec ts{waitMs / 1000, (waitMs % 1000) * 1000000L};
  return sigtimedwait(&stopSignals, nullptr, &ts) > 0;
}

void touch(const std::string& path) {
  if (path.empty()) return;
  if (FILE* f = std::fopen(path.c_str(), "w")) std::fclose(f);
}

Client connectTo(const Args& a) {
  rdmamsg::ConnectOptions opts;
  opts.clientName = "subjects_bench " + a.mode;
  if (!a.idle.empty()) {
    auto s = rdmamsg::parseIdleStrategy(a.idle);
    if (!s) die("--idle", rdmamsg::Status(rdmamsg::Errc::bad_request, a.idle));
    opts.idleStrategy = *s;
  }
  auto c = Client::connect(a.socket, opts);
  if (!c) die("connect", c.status());
  return std::move(*c);
}

std::span<const std::byte> bytes(const std::vector<char>& buf) {
  return std::as_bytes(std::span(buf.data(), buf.size()));
}

// --- sub-sink ----------------------------------------------------------------------------

struct Sink {
  sb_stream stream{};
  uint64_t dropped = 0;  // rdmamsg counts a subscription's drops in the publishers' completions
  bool failed = false;
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

void sinkMain(const Args& a, Sink& k) {
  Client c = connectTo(a);
  auto sub = c.subscribe(a.subject);
  if (!sub) die("subscribe", sub.status());
  sb_stream_init(&k.stream);
  uint64_t lastEvent = sb_now_ns();
  rdmamsg::MessageView v;
  while (k.stream.received < static_cast<uint64_t>(a.count)) {
    rdmamsg::Status s = c.receiveView(v, 100ms);
    if (s.code() == rdmamsg::Errc::timeout) {
      if (sb_now_ns() - lastEvent > static_cast<uint64_t>(a.idleTimeoutSec) * 1000000000ull) {
        k.failed = true;
        break;
      }
      continue;
    }
    if (!s) {
      std::fprintf(stderr, "subjects_bench: sub-sink: %s\n", s.toString().c_str());
      k.failed = true;
      break;
    }
    const uint64_t probesBefore = k.stream.probes;
    sb_stream_take(&k.stream, v.payload.data(), v.payload.size());
    if (s = c.release(v); !s) die("release", s);
    if (probesBefore == 0 && k.stream.probes == 1) markReady();
    lastEvent = k.stream.lastNs ? k.stream.lastNs : sb_now_ns();
  }
  (void)c.unsubscribe(*sub);
  c.close();
}

void printStream(const Args& a, const std::vector<Sink>& sinks) {
  uint64_t received = 0, bytesIn = 0, outOfOrder = 0, gaps = 0, start = UINT64_MAX, last = 0;
  bool complete = true;
  for (const Sink& k : sinks) {
    received += k.stream.received;
    bytesIn += k.stream.bytes;
    outOfOrder += k.stream.outOfOrder;
    gaps += k.stream.gaps;
    if (k.stream.received && k.stream.firstStartNs < start) start = k.stream.firstStartNs;
    if (k.stream.lastNs > last) last = k.stream.lastNs;
    if (k.failed || k.stream.received < static_cast<uint64_t>(a.count)) complete = false;
  }
  const double n = static_cast<double>(sinks.size());
  const double secs = received && last > start ? static_cast<double>(last - start) / 1e9 : 0;
  const double perSub = static_cast<double>(received) / n;
  const long size = received ? static_cast<long>(bytesIn / received) : a.size;
  std::printf(
      "{\"system\": \"rdmamsg\", \"mode\": \"sub-sink\", \"subs\": %zu, \"size\": %ld, "
      "\"count\": %ld, \"received\": %lu, \"complete\": %s, \"seconds\": %.6f, "
      "\"msgs_per_sec\": %.1f, \"deliveries_per_sec\": %.1f, \"mb_per_sec\": %.2f, "
      "\"out_of_order\": %lu, \"gaps\": %lu, \"dropped\": null, \"slow_consumer_events\": null}\n",
      sinks.size(), size, a.count, static_cast<unsigned long>(received),
      complete ? "true" : "false", secs, secs > 0 ? perSub / secs : 0,
      secs > 0 ? static_cast<double>(received) / secs : 0,
      secs > 0 ? static_cast<double>(bytesIn) / n / 1e6 / secs : 0,
      static_cast<unsigned long>(outOfOrder), static_cast<unsigned long>(gaps));
}

int subSink(const Args& a) {
  if (a.count <= 0 || a.subs <= 0) return usage();
  std::vector<Sink> sinks(static_cast<size_t>(a.subs));
  for (Sink& k : sinks)
    k.thread = std::thread(sinkMain, std::cref(a), std::ref(k));
  // Ready once every subscription took a probe: the publisher's daemon knows them all.
  bool ready;
  {
    std::unique_lock lock(readyLock);
    ready = readyCond.wait_for(lock, std::chrono::seconds(a.idleTimeoutSec),
                               [&] { return readyCount == a.subs; });
  }
  if (ready) touch(a.readyFile);
  bool ok = true;
  for (Sink& k : sinks) {
    k.thread.join();
    ok = ok && !k.failed;
  }
  printStream(a, sinks);
  return ok ? 0 : 1;
}

// --- pub-stream --------------------------------------------------------------------------

struct Outcomes {
  uint64_t completions = 0, matched = 0, taken = 0, dropped = 0, noSubscribers = 0, errors = 0;
  std::string firstError;

  void add(const rdmamsg::Completion& c) {
    completions++;
    matched += c.matched;
    taken += c.taken;
    dropped += c.dropped;
    if (c.status.ok()) return;
    if (c.status.code() == rdmamsg::Errc::no_subscribers) {
      noSubscribers++;
      return;
    }
    if (errors++ == 0) firstError = c.status.toString();
  }
};

constexpr uint64_t kBurst = 1024;  // publishes between two looks for completions

int pubStream(const Args& a) {
  if (a.count <= 0 || a.size < SB_HEADER || a.window <= 0) return usage();
  Client c = connectTo(a);
  std::vector<char> buf(static_cast<size_t>(a.size), 'x');
  sb_header h{SB_KIND_DATA, static_cast<uint32_t>(a.id), 0, sb_now_ns()};
  const uint64_t t0 = h.startNs;
  const auto deadline = std::chrono::seconds(a.timeoutSec);
  Outcomes out;
  rdmamsg::Completion done;
  uint64_t published = 0;
  for (long i = 0; i < a.count; i++) {
    while (published - out.completions >= static_cast<uint64_t>(a.window)) {
      if (rdmamsg::Status s = c.waitCompletion(done, deadline); !s) die("wait completion", s);
      out.add(done);
    }
    h.seq = static_cast<uint64_t>(i);
    sb_put(buf.data(), &h);
    auto id = c.publish(a.subject, bytes(buf));
    if (!id) die("publish", id.status());
    published++;
    // Completions are taken in bursts, as `rdmamsg bench throughput` takes them: a poll that
    // finds none costs the client a look at its doorbell and its socket.
    if (published % kBurst == 0)
      while (c.pollCompletion(done))
        out.add(done);
  }
  while (out.completions < published) {
    if (rdmamsg::Status s = c.waitCompletion(done, deadline); !s) die("wait completion", s);
    out.add(done);
  }
  const double secs = static_cast<double>(sb_now_ns() - t0) / 1e9;
  std::printf(
      "{\"system\": \"rdmamsg\", \"mode\": \"pub-stream\", \"size\": %ld, \"count\": %ld, "
      "\"seconds\": %.6f, \"msgs_per_sec\": %.1f, \"mb_per_sec\": %.2f, \"window\": %ld, "
      "\"confirmed\": true, \"matched\": %lu, \"taken\": %lu, \"dropped\": %lu, "
      "\"no_subscribers\": %lu, \"errors\": %lu}\n",
      a.size, a.count, secs, static_cast<double>(a.count) / secs,
      static_cast<double>(a.count) * static_cast<double>(a.size) / 1e6 / secs, a.window,
      static_cast<unsigned long>(out.matched), static_cast<unsigned long>(out.taken),
      static_cast<unsigned long>(out.dropped), static_cast<unsigned long>(out.noSubscribers),
      static_cast<unsigned long>(out.errors));
  if (out.errors) std::fprintf(stderr, "subjects_bench: pub-stream: %s\n", out.firstError.c_str());
  return out.errors || out.noSubscribers ? 1 : 0;
}

// --- probe -------------------------------------------------------------------------------

bool allExist(const Args& a) {
  for (const std::string& f : a.until)
    if (access(f.c_str(), F_OK) != 0) return false;
  return true;
}

int probe(const Args& a) {
  if (a.until.empty()) return usage();
  Client c = connectTo(a);
  std::vector<char> buf(64, 0);
  sb_header h{SB_KIND_PROBE, static_cast<uint32_t>(a.id), 0, sb_now_ns()};
  const uint64_t deadline = h.startNs + static_cast<uint64_t>(a.timeoutSec) * 1000000000ull;
  rdmamsg::Completion done;
  uint64_t published = 0, completions = 0;
  while (!allExist(a)) {
    if (sb_now_ns() > deadline) {
      std::fprintf(stderr, "subjects_bench: probe: no answer on %s within %ld s\n",
                   a.subject.c_str(), a.timeoutSec);
      return 1;
    }
    sb_put(buf.data(), &h);
    h.seq++;
    // Until the interest arrives, a probe's completion is no_subscribers.
    auto id = c.publish(a.subject, bytes(buf));
    if (!id) die("publish", id.status());
    published++;
    if (rdmamsg::Status s = c.flush(); !s) die("flush", s);
    while (c.pollCompletion(done))
      completions++;
    if (stopRequested(2)) return 1;  // the pace of the probes, not a synchronisation
  }
  // The last probes' completions: a subscriber that has not taken them yet is not waited
  // for (the probe's subscribers ignore them, and the client's close fails nothing).
  return 0;
}

// --- reply-echo and request-latency --------------------------------------------------------

int replyEcho(const Args& a) {
  Client c = connectTo(a);
  auto sub = c.subscribe(a.subject);
  if (!sub) die("subscribe", sub.status());
  bool ready = false;
  long answered = 0, failedReplies = 0;
  rdmamsg::Message m;
  rdmamsg::Completion done;
  while (!stopRequested(0)) {
    rdmamsg::Status s = c.receive(m, 100ms);
    if (s.code() == rdmamsg::Errc::timeout) continue;
    if (!s) die("receive", s);
    if (m.isRequest()) {
      auto id = c.reply(m, m.payload);
      if (!id) die("reply", id.status());
      answered++;
    } else if (!ready) {
      ready = true;  // a probe: the requester's daemon knows this subscription
      touch(a.readyFile);
    }
    while (c.pollCompletion(done))
      if (!done.status.ok()) failedReplies++;
    if (a.count > 0 && answered >= a.count) break;
  }
  std::fprintf(stderr, "subjects_bench: reply-echo: answered %ld, replies failed %ld\n", answered,
               failedReplies);
  return 0;
}

int requestLatency(const Args& a) {
  if (a.count <= 0 || a.size < SB_HEADER) return usage();
  Client c = connectTo(a);
  std::vector<char> buf(static_cast<size_t>(a.size), 'x');
  std::vector<double> us(static_cast<size_t>(a.count));
  sb_header h{SB_KIND_DATA, static_cast<uint32_t>(a.id), 0, sb_now_ns()};
  long wrong = 0;
  rdmamsg::Message reply;
  for (long i = 0; i < a.warmup + a.count; i++) {
    h.seq = static_cast<uint64_t>(i);
    sb_put(buf.data(), &h);
    const uint64_t t0 = sb_now_ns();
    rdmamsg::Status s =
        c.requestAndWait(a.subject, bytes(buf), reply, std::chrono::seconds(a.timeoutSec));
    const uint64_t t1 = sb_now_ns();
    if (!s) die("request", s);
    sb_header back;
    if (!sb_get(reply.payload.data(), reply.payload.size(), &back) || back.seq != h.seq) wrong++;
    if (i >= a.warmup) us[static_cast<size_t>(i - a.warmup)] = static_cast<double>(t1 - t0) / 1e3;
  }
  double mean, max;
  const size_t n = us.size();
  sb_latency_stats(us.data(), n, &mean, &max);
  std::printf(
      "{\"system\": \"rdmamsg\", \"mode\": \"request-latency\", \"size\": %ld, \"count\": %ld, "
      "\"warmup\": %ld, \"p50_us\": %.2f, \"p99_us\": %.2f, \"p999_us\": %.2f, \"mean_us\": %.2f, "
      "\"max_us\": %.2f, \"wrong_replies\": %ld}\n",
      a.size, a.count, a.warmup, sb_percentile(us.data(), n, 50), sb_percentile(us.data(), n, 99),
      sb_percentile(us.data(), n, 99.9), mean, max, wrong);
  return wrong ? 1 : 0;
}

// --- hold-subs ---------------------------------------------------------------------------

int holdSubs(const Args& a) {
  if (a.count <= 0) return usage();
  Client c = connectTo(a);
  const uint64_t t0 = sb_now_ns();
  uint64_t last = 0;
  for (long i = 0; i < a.count; i++) {
    auto sub = c.subscribe(a.subject + ".n" + std::to_string(i));
    if (!sub) die("subscribe", sub.status());
    last = *sub;
  }
  const double setup = static_cast<double>(sb_now_ns() - t0) / 1e9;
  // Interest travels in order: once the other side's probe reaches the last subscription,
  // that side has heard of all of them.
  rdmamsg::Message m;
  while (!stopRequested(0)) {
    rdmamsg::Status s = c.receive(m, 100ms);
    if (s.code() == rdmamsg::Errc::timeout) continue;
    if (!s) die("receive", s);
    if (m.subscription != last) continue;
    std::printf(
        "{\"system\": \"rdmamsg\", \"mode\": \"hold-subs\", \"subscriptions\": %ld, "
        "\"setup_seconds\": %.3f, \"ready_seconds\": %.3f}\n",
        a.count, setup, static_cast<double>(sb_now_ns() - t0) / 1e9);
    touch(a.readyFile);
    int sig;
    sigwait(&stopSignals, &sig);
    break;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!parse(argc, argv, a)) return usage();
  sigemptyset(&stopSignals);
  sigaddset(&stopSignals, SIGTERM);
  sigaddset(&stopSignals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stopSignals, nullptr);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (a.mode == "sub-sink") return subSink(a);
  if (a.mode == "pub-stream") return pubStream(a);
  if (a.mode == "probe") return probe(a);
  if (a.mode == "reply-echo") return replyEcho(a);
  if (a.mode == "request-latency") return requestLatency(a);
  if (a.mode == "hold-subs") return holdSubs(a);
  return usage();
}
