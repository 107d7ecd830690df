// `rdmamsg bench`: the dispatch, `bench throughput` (K sender connections to
// one daemon, optionally the receiving sink on another) and `bench sink`.
//
// One thread multiplexes every connection (the K senders and the sink) with
// poll() and Client::processIo(), rather than one thread per sender: the
// daemons under test run on the same few cores, so the tool should cost at
// most one core and not compete with itself, and one loop keeps counts and
// timestamps in one place (no cross-thread handoff in the measurement).
// Client::send waits for the socket once a few MiB are unwritten; while it
// waited this thread would not read the sink and the pipeline could stall,
// so each sender queues at most kUnwrittenBudget bytes between the times its
// write buffer is seen empty, and send() never blocks.
#include <poll.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <limits>

#include "client/cli/bench.h"
#include "client/cli/idle_wait.h"

namespace rdmamsg::cli {
namespace bench {
namespace {

constexpr size_t kUnwrittenBudget = 1u << 20;
constexpr size_t kFrameOverhead = 160;  // SEND frame header and names, at most
constexpr int kBurst = 1024;            // messages per sender per loop turn
constexpr uint64_t kUnbounded = std::numeric_limits<uint64_t>::max();

struct Sender {
  explicit Sender(Client c) : client(std::move(c)) {}
  Client client;
  uint32_t index = 0;
  uint64_t quota = 0;
  uint64_t sent = 0, acked = 0, failed = 0;
  size_t unwritten = 0;            // upper bound of queued bytes not yet written
  std::vector<std::byte> payload;  // --copy-send
  SendClaim claim;                 // else: held over a would_block
  Completion completion;
};

class ThroughputRun {
 public:
  ThroughputRun(const BenchArgs& args, Destination dest) : args_(args), dest_(std::move(dest)) {}
  Exit run();

 private:
  Status setUp();
  Status loop();
  bool sendSome(Sender& s);
  Result<uint64_t> trySendOne(Sender& s);
  // The senders' system calls (summed) and the sink's.
  std::pair<ClientCounters, ClientCounters> clientCounters() const {
    ClientCounters senders, sink;
    for (const auto& s : senders_)
      senders += s.client.counters();
    if (sink_) sink = sink_->counters();
    return {senders, sink};
  }
  std::pair<ClientCounters, ClientCounters> callsBefore_, callsAfter_;
  std::optional<IdleWait> idle_;  // the loop's, with its poll count
  bool claims() const { return !args_.copySend && args_.size >= Client::kMinClaimInPlace; }
  void drainCompletions(Sender& s);
  void drainSink();
  void stopSending();
  bool finished() const;
  Exit report();
  void noteFailure(const Status& st) {
    if (failure_.ok()) failure_ = st;
    stopSending();
  }
  // A lost connection ends the run: its completions will never come.
  void checkConnection(const Client& c) {
    if (c.connectionStatus().ok()) return;
    noteFailure(c.connectionStatus());
    aborted_ = true;
  }

  const BenchArgs& args_;
  Destination dest_;
  std::vector<DaemonWatch> watches_;
  std::optional<Client> sink_;
  std::vector<Sender> senders_;
  std::vector<uint64_t> expected_;  // next sequence number per sender, at the sink
  MessageView view_;
  Status failure_;
  bool aborted_ = false;
  uint64_t received_ = 0, orderErrors_ = 0, progress_ = 0;
  Clock::time_point start_, lastAck_, lastDelivery_;
};

Status ThroughputRun::setUp() {
  if (!args_.peerSocket.empty()) {
    ConnectOptions opts;
    opts.clientName = "rdmamsg-bench-sink";
    Result<Client> c = Client::connect(args_.peerSocket, opts);
    if (!c) return c.status();
    applyIdleStrategy(*c, args_.idleStrategy);
    sink_.emplace(std::move(c).value());
    if (Status st = sink_->registerService(dest_.service); !st.ok()) return st;
  }
  const uint64_t total = args_.seconds ? kUnbounded : args_.count.value_or(1000000);
  for (uint32_t i = 0; i < args_.senders; ++i) {
    ConnectOptions opts;
    opts.clientName = "rdmamsg-bench-" + std::to_string(i);
    // A payload area of sixteen messages or more: a large message waits
    // there for its window (four messages of 1 MiB) and for the link, and
    // the daemon sends it without a copy (ConnectOptions).
    opts.payloadAreaCapacity = std::clamp(std::bit_ceil(16 * (args_.size + kFrameOverhead)),
                                          opts.payloadAreaCapacity, size_t{256} << 20);
    Result<Client> c = Client::connect(args_.socket, opts);
    if (!c) return c.status();
    applyIdleStrategy(*c, args_.idleStrategy);
    Sender& s = senders_.emplace_back(std::move(c).value());
    s.index = i;
    s.quota = total == kUnbounded ? kUnbounded
                                  : total / args_.senders + (i < total % args_.senders ? 1 : 0);
    if (!claims()) s.payload.assign(args_.size, std::byte{0x5a});
  }
  expected_.assign(args_.senders, 0);
  watches_.emplace_back("sender", args_.socket);
  if (sink_) watches_.emplace_back("receiver", args_.peerSocket);
  for (auto& w : watches_) {
    if (Status st = w.before(); !st.ok()) return st;
  }
  return {};
}

bool ThroughputRun::sendSome(Sender& s) {
  const size_t frame = args_.size + kFrameOverhead;
  for (int burst = 0; burst < kBurst; ++burst) {
    if (s.sent >= s.quota || s.client.inFlight() >= args_.window) return false;
    if (s.unwritten != 0 && s.unwritten + frame > kUnwrittenBudget) return false;
    // Never waits: a held destination (its listener, maybe this run's own
    // sink, is behind) must not stop this thread from draining the sink.
    Result<uint64_t> id = trySendOne(s);
    if (!id && id.status().code() == Errc::would_block) return false;
    if (!id) {
      noteFailure(id.status());
      return false;
    }
    ++s.sent;
    s.unwritten = s.client.wantsWrite() ? s.unwritten + frame : 0;
  }
  return s.sent < s.quota;
}

// A large message is written where it is sent from (a claim, which over
// shared memory lies in the payload area), a small one or with --copy-send
// into the bench's buffer, which trySend copies. Either way only the header
// is written per message: the bench measures the path, not the making of
// payloads.
Result<uint64_t> ThroughputRun::trySendOne(Sender& s) {
  if (!claims()) {
    writeHeader(s.payload, s.sent, s.index);
    return s.client.trySend(dest_.node, dest_.service, s.payload);
  }
  if (s.claim.handle == 0) {
    if (Status st = s.client.claim(s.claim, dest_.node, dest_.service, args_.size); !st.ok())
      return st;
    writeHeader(s.claim.payload, s.sent, s.index);
  }
  return s.client.tryCommit(s.claim);
}

void ThroughputRun::drainCompletions(Sender& s) {
  uint64_t n = 0;
  while (s.client.pollCompletion(s.completion)) {
    ++n;
    if (s.completion.status.ok()) {
      ++s.acked;
    } else {
      ++s.failed;
      noteFailure(s.completion.status);
    }
  }
  if (!s.client.wantsWrite()) s.unwritten = 0;
  checkConnection(s.client);
  if (n == 0) return;
  progress_ += n;
  lastAck_ = Clock::now();
}

// The sink reads each message in place (a view, released once checked): a
// receiver after speed does not copy payloads it only looks at.
void ThroughputRun::drainSink() {
  uint64_t n = 0;
  while (sink_->tryReceiveView(view_)) {
    ++n;
    const Header h = readHeader(view_.payload);
    const bool valid = h.valid && h.sender < expected_.size() && view_.payload.size() == args_.size;
    if (valid && h.seq != expected_[h.sender]) ++orderErrors_;
    if (valid) expected_[h.sender] = h.seq + 1;
    if (!valid) ++orderErrors_;
    if (Status st = sink_->release(view_); !st.ok()) noteFailure(st);
  }
  checkConnection(*sink_);
  if (n == 0) return;
  received_ += n;
  progress_ += n;
  lastDelivery_ = Clock::now();
}

void ThroughputRun::stopSending() {
  for (auto& s : senders_)
    s.quota = s.sent;
}

bool ThroughputRun::finished() const {
  if (aborted_) return true;
  uint64_t sent = 0, failed = 0;
  for (const auto& s : senders_) {
    if (s.sent < s.quota || s.acked + s.failed < s.sent) return false;
    sent += s.sent;
    failed += s.failed;
  }
  return !sink_ || received_ + failed >= sent;
}

Status ThroughputRun::loop() {
  std::vector<pollfd> fds(senders_.size() + 1);
  std::vector<Client*> clients(senders_.size() + 1);
  IdleWait& idle = idle_.emplace(senders_.front().client.idleStrategy());
  start_ = lastAck_ = lastDelivery_ = Clock::now();
  callsBefore_ = clientCounters();
  const auto stallLimit = std::chrono::seconds(args_.timeoutSeconds);
  auto lastProgressAt = start_;
  uint64_t lastProgress = 0;
  while (!finished()) {
    if (stopRequested()) return Status(Errc::timeout, "interrupted");
    const auto now = Clock::now();
    if (args_.seconds && secondsBetween(start_, now) >= *args_.seconds) stopSending();
    if (progress_ != lastProgress) {
      lastProgress = progress_;
      lastProgressAt = now;
      idle.worked();
    } else if (now - lastProgressAt > stallLimit) {
      return Status(Errc::timeout, "no message delivered or acknowledged for " +
                                       std::to_string(args_.timeoutSeconds) + " s");
    }
    bool more = false;
    for (size_t i = 0; i < senders_.size(); ++i) {
      more = sendSome(senders_[i]) || more;
      fds[i] = {senders_[i].client.fd(),
                static_cast<short>(POLLIN | (senders_[i].client.wantsWrite() ? POLLOUT : 0)), 0};
      clients[i] = &senders_[i].client;
    }
    clients.back() = sink_ ? &*sink_ : nullptr;
    fds.back() = {sink_ ? sink_->fd() : -1,
                  static_cast<short>(POLLIN | (sink_ && sink_->wantsWrite() ? POLLOUT : 0)), 0};
    if (idle.poll(fds, clients, more ? 0 : 50) < 0 && errno != EINTR) {
      return Status(Errc::io_error, "poll failed");
    }
    for (size_t i = 0; i < senders_.size(); ++i) {
      // pollCompletion reads the socket when its queue is empty.
      if (fds[i].revents != 0) drainCompletions(senders_[i]);
    }
    if (sink_ && fds.back().revents != 0) drainSink();
  }
  return {};
}

Exit ThroughputRun::report() {
  uint64_t sent = 0, acked = 0, failed = 0;
  for (const auto& s : senders_) {
    sent += s.sent;
    acked += s.acked;
    failed += s.failed;
  }
  const auto end = std::max(lastAck_, lastDelivery_);
  const double elapsed = secondsBetween(start_, end);
  const double rate = elapsed > 0 ? static_cast<double>(acked) / elapsed : 0;
  const bool complete = acked == sent && failed == 0 && (!sink_ || received_ == sent);
  const bool ok = failure_.ok() && complete && orderErrors_ == 0;
  Json j;
  j["mode"] = "throughput";
  j["parameters"] = {{"destination", dest_.node + "/" + dest_.service},
                     {"socket", args_.socket},
                     {"sink_socket", args_.peerSocket},
                     {"size", args_.size},
                     {"count", args_.seconds ? Json() : Json(sent)},
                     {"seconds", args_.seconds ? Json(*args_.seconds) : Json()},
                     {"senders", args_.senders},
                     {"window", args_.window},
                     {"send", claims() ? "claim" : "copy"}};
  j["results"] = {
      {"sent", sent},
      {"acked", acked},
      {"failed", failed},
      {"delivered", sink_ ? Json(received_) : Json()},
      {"order_errors", orderErrors_},
      {"elapsed_seconds", elapsed},
      {"seconds_to_last_ack", secondsBetween(start_, lastAck_)},
      {"seconds_to_last_delivery", sink_ ? Json(secondsBetween(start_, lastDelivery_)) : Json()},
      {"msgs_per_second", rate},
      {"mb_per_second", rate * static_cast<double>(args_.size) / 1e6},
      {"ok", ok}};
  if (!failure_.ok()) j["results"]["error"] = failure_.toString();
  Json daemons = Json::object();
  for (auto& w : watches_) {
    if (w.after().ok()) daemons[w.role()] = w.report(acked);
  }
  j["daemons"] = daemons;
  // Per message acknowledged: the senders' library, the sink's, and the
  // bench's own polls of their fds (one thread drives them all).
  const double n = static_cast<double>(acked);
  j["clients"] = {
      {"senders", clientCalls(callsBefore_.first, callsAfter_.first, n)},
      {"sink", sink_ ? clientCalls(callsBefore_.second, callsAfter_.second, n) : Json()},
      {"bench_polls", n > 0 && idle_ ? static_cast<double>(idle_->polls()) / n : 0.0}};
  if (args_.json) {
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("throughput %s: %llu x %llu B, %u sender(s), window %zu\n",
                j["parameters"]["destination"].get<std::string>().c_str(),
                static_cast<unsigned long long>(sent), static_cast<unsigned long long>(args_.size),
                args_.senders, args_.window);
    std::printf("  sent %llu, acked %llu, failed %llu, delivered %s, order errors %llu\n",
                static_cast<unsigned long long>(sent), static_cast<unsigned long long>(acked),
                static_cast<unsigned long long>(failed),
                sink_ ? std::to_string(received_).c_str() : "(remote sink)",
                static_cast<unsigned long long>(orderErrors_));
    std::printf("  %.3f s: %.0f msgs/s, %.1f MB/s\n", elapsed, rate,
                rate * static_cast<double>(args_.size) / 1e6);
    printDaemonTable(daemons);
  }
  std::fflush(stdout);
  if (!failure_.ok()) return fail("throughput to " + dest_.node + "/" + dest_.service, failure_);
  if (ok) return Exit::ok;
  std::fprintf(stderr,
               "rdmamsg: bench: lost or reordered messages: %llu sent, %llu acked, %llu "
               "delivered, %llu out of order\n",
               static_cast<unsigned long long>(sent), static_cast<unsigned long long>(acked),
               static_cast<unsigned long long>(received_),
               static_cast<unsigned long long>(orderErrors_));
  return Exit::failure;
}

Exit ThroughputRun::run() {
  if (Status st = setUp(); !st.ok()) return fail("throughput set-up", st);
  if (Status st = loop(); !st.ok()) noteFailure(st);
  callsAfter_ = clientCounters();
  return report();
}

}  // namespace

Exit runThroughput(const BenchArgs& args) {
  return runAgainstTarget<ThroughputRun>(args);
}

}  // namespace bench

std::string_view toString(BenchMode mode) {
  switch (mode) {
    case BenchMode::throughput:
      return "throughput";
    case BenchMode::latency:
      return "latency";
    case BenchMode::sink:
      return "sink";
    case BenchMode::echo:
      return "echo";
  }
  return "?";
}

Exit runBench(const BenchArgs& args) {
  if (args.size < bench::kHeaderSize) {
    std::fprintf(stderr, "rdmamsg: bench: --size must be at least %zu bytes\n", bench::kHeaderSize);
    return Exit::usage;
  }
  switch (args.mode) {
    case BenchMode::throughput:
      return bench::runThroughput(args);
    case BenchMode::latency:
      return bench::runLatency(args);
    case BenchMode::sink:
      return bench::runSink(args);
    case BenchMode::echo:
      return bench::runEcho(args);
  }
  return Exit::usage;
}

}  // namespace rdmamsg::cli
