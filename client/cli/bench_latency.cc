// `rdmamsg bench latency`: round trips through an echo service on another
// node, one message outstanding; RTT percentiles in microseconds.
//
// With --echo-socket the echo responder runs in this process, on the same
// thread: one poll() over both connections. With one message outstanding
// only one side has work at any time, so a second thread would add nothing
// but a wake-up handoff to the measured path.
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "client/cli/bench.h"
#include "client/cli/idle_wait.h"

namespace rdmamsg::cli::bench {
namespace {

class LatencyRun {
 public:
  LatencyRun(const BenchArgs& args, Destination dest) : args_(args), dest_(std::move(dest)) {}
  Exit run();

 private:
  Status setUp();
  Status roundTrip(uint64_t seq, int64_t* nanos);
  Status awaitQuiet();
  Status pollOnce(int timeoutMs);
  void drainCompletions();
  Exit report(const Status& outcome);
  uint64_t measured() const { return args_.count.value_or(100000); }
  // The measuring client's system calls and the echo's (when it runs here).
  std::pair<ClientCounters, ClientCounters> clientCounters() const {
    return {client_->counters(), echoClient_ ? echoClient_->counters() : ClientCounters{}};
  }
  std::pair<ClientCounters, ClientCounters> callsBefore_, callsAfter_;
  uint64_t benchPolls_ = 0;

  const BenchArgs& args_;
  Destination dest_;
  std::string replyService_;
  std::optional<Client> client_;
  std::optional<Client> echoClient_;
  std::optional<Echoer> echo_;
  std::vector<DaemonWatch> watches_;
  std::vector<std::byte> payload_;
  std::vector<int64_t> rtts_;
  Message reply_;
  Completion completion_;
  uint64_t acked_ = 0, failed_ = 0, sent_ = 0, stray_ = 0;
  Status failure_;
  Clock::time_point start_, end_;
  std::optional<IdleWait> idle_;  // the measuring client's strategy, for both
};

Status LatencyRun::setUp() {
  if (!args_.peerSocket.empty()) {
    ConnectOptions opts;
    opts.clientName = "rdmamsg-bench-echo";
    Result<Client> c = Client::connect(args_.peerSocket, opts);
    if (!c) return c.status();
    applyIdleStrategy(*c, args_.idleStrategy);
    echoClient_.emplace(std::move(c).value());
    if (Status st = echoClient_->registerService(dest_.service); !st.ok()) return st;
    echo_.emplace(*echoClient_, dest_.service);
  }
  ConnectOptions opts;
  opts.clientName = "rdmamsg-bench-latency";
  Result<Client> c = Client::connect(args_.socket, opts);
  if (!c) return c.status();
  applyIdleStrategy(*c, args_.idleStrategy);
  client_.emplace(std::move(c).value());
  replyService_ = "bench-reply-" + std::to_string(::getpid());
  if (Status st = client_->registerService(replyService_); !st.ok()) return st;
  // A reply counts as taken once the next request is queued: both go in one
  // write (the request/response pattern of docs/client-api.md).
  client_->setConfirmOnReceive(false);
  payload_.assign(args_.size, std::byte{0x5a});
  idle_.emplace(client_->idleStrategy());
  rtts_.reserve(measured());
  watches_.emplace_back("sender", args_.socket);
  if (echo_) watches_.emplace_back("receiver", args_.peerSocket);
  return {};
}

// Waits for readiness on both connections and services the echo side.
Status LatencyRun::pollOnce(int timeoutMs) {
  pollfd fds[2] = {
      {client_->fd(), static_cast<short>(POLLIN | (client_->wantsWrite() ? POLLOUT : 0)), 0},
      {echoClient_ ? echoClient_->fd() : -1,
       static_cast<short>(POLLIN | (echoClient_ && echoClient_->wantsWrite() ? POLLOUT : 0)), 0}};
  Client* const clients[2] = {&*client_, echoClient_ ? &*echoClient_ : nullptr};
  if (idle_->poll(fds, clients, timeoutMs) < 0 && errno != EINTR) {
    return Status(Errc::io_error, "poll failed");
  }
  if (echo_ && fds[1].revents != 0) {
    echo_->serviceIo();
    if (!echoClient_->connectionStatus().ok()) return echoClient_->connectionStatus();
  }
  if (fds[0].revents != 0) drainCompletions();
  return client_->connectionStatus();
}

// Collects the requests' completions; reads the socket, so replies queue too.
void LatencyRun::drainCompletions() {
  while (client_->pollCompletion(completion_)) {
    if (completion_.status.ok()) {
      ++acked_;
    } else {
      ++failed_;
      if (failure_.ok()) failure_ = completion_.status;
    }
  }
}

Status LatencyRun::roundTrip(uint64_t seq, int64_t* nanos) {
  writeHeader(payload_, seq, 0);
  const auto t0 = Clock::now();
  idle_->worked();
  Result<uint64_t> id = client_->send(dest_.node, dest_.service, payload_);
  if (!id) return id.status();
  ++sent_;
  // Writes the request and the previous reply's confirmation; a lost
  // connection shows in the wait below.
  static_cast<void>(client_->confirmReceived());
  static_cast<void>(client_->processIo());
  const auto deadline = t0 + std::chrono::seconds(args_.timeoutSeconds);
  for (;;) {
    while (client_->tryReceive(reply_)) {
      const Header h = readHeader(reply_.payload);
      if (!h.valid || h.seq != seq) {
        ++stray_;  // not ours, or a late echo of an earlier round
        continue;
      }
      *nanos = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
      return {};
    }
    if (!failure_.ok()) return failure_;
    if (stopRequested()) return Status(Errc::timeout, "interrupted");
    const auto now = Clock::now();
    if (now >= deadline) {
      return Status(Errc::timeout, "no echo of message " + std::to_string(seq) + " within " +
                                       std::to_string(args_.timeoutSeconds) + " s");
    }
    if (Status st = pollOnce(100); !st.ok()) return st;
  }
}

// After the last round trip: waits for every request's and echo's completion.
Status LatencyRun::awaitQuiet() {
  const auto deadline = Clock::now() + std::chrono::seconds(args_.timeoutSeconds);
  static_cast<void>(client_->confirmReceived());  // the last reply (a failure shows below)
  while (acked_ + failed_ < sent_ || (echoClient_ && echoClient_->inFlight() > 0)) {
    if (Clock::now() >= deadline) return Status(Errc::timeout, "acknowledgements missing");
    if (Status st = pollOnce(100); !st.ok()) return st;
    if (echo_) echo_->serviceIo();
    drainCompletions();
  }
  return {};
}

Exit LatencyRun::report(const Status& outcome) {
  LatencySummary s = summarize(rtts_);
  const uint64_t echoFailed = echo_ ? echo_->failed() : 0;
  const bool ok = outcome.ok() && rtts_.size() == measured() && failed_ == 0 && echoFailed == 0;
  Json j;
  j["mode"] = "latency";
  j["parameters"] = {{"destination", dest_.node + "/" + dest_.service},
                     {"socket", args_.socket},
                     {"echo_socket", args_.peerSocket},
                     {"reply_service", replyService_},
                     {"size", args_.size},
                     {"count", measured()},
                     {"warmup", args_.warmup}};
  const double elapsed = secondsBetween(start_, end_);
  j["results"] = {
      {"round_trips", rtts_.size()},
      {"sent", sent_},
      {"acked", acked_},
      {"failed", failed_},
      {"echo_failed", echoFailed},
      {"stray_replies", stray_},
      {"elapsed_seconds", elapsed},
      {"round_trips_per_second", elapsed > 0 ? static_cast<double>(rtts_.size()) / elapsed : 0.0},
      {"rtt_us",
       {{"p50", s.p50},
        {"p99", s.p99},
        {"p99.9", s.p999},
        {"mean", s.mean},
        {"min", s.min},
        {"max", s.max}}},
      {"ok", ok}};
  Status why = !outcome.ok()    ? outcome
               : !failure_.ok() ? failure_
               : echo_          ? echo_->failure()
                                : Status();
  if (!why.ok()) j["results"]["error"] = why.toString();
  Json daemons = Json::object();
  for (auto& w : watches_) {
    if (w.after().ok()) daemons[w.role()] = w.report(2 * rtts_.size());
  }
  j["daemons"] = daemons;
  // Per round trip: the measuring client's library, the echo's, and the
  // bench's own polls of their fds (one thread drives both).
  const double n = static_cast<double>(rtts_.size());
  j["clients"] = {
      {"requester", clientCalls(callsBefore_.first, callsAfter_.first, n)},
      {"echo", echoClient_ ? clientCalls(callsBefore_.second, callsAfter_.second, n) : Json()},
      {"bench_polls", n > 0 ? static_cast<double>(benchPolls_) / n : 0.0}};
  if (args_.json) {
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("latency %s: %zu round trips of %llu B (after %llu warm-up)\n",
                j["parameters"]["destination"].get<std::string>().c_str(), rtts_.size(),
                static_cast<unsigned long long>(args_.size),
                static_cast<unsigned long long>(args_.warmup));
    std::printf("  rtt us: p50 %.1f  p99 %.1f  p99.9 %.1f  mean %.1f  min %.1f  max %.1f\n", s.p50,
                s.p99, s.p999, s.mean, s.min, s.max);
    std::printf("  acked %llu/%llu, failed %llu, echo failed %llu\n",
                static_cast<unsigned long long>(acked_), static_cast<unsigned long long>(sent_),
                static_cast<unsigned long long>(failed_),
                static_cast<unsigned long long>(echoFailed));
    printDaemonTable(daemons);
  }
  std::fflush(stdout);
  if (!why.ok()) return fail("latency to " + dest_.node + "/" + dest_.service, why);
  return ok ? Exit::ok : Exit::failure;
}

Exit LatencyRun::run() {
  if (Status st = setUp(); !st.ok()) return fail("latency set-up", st);
  Status outcome;
  int64_t nanos = 0;
  for (uint64_t i = 0; i < args_.warmup && outcome.ok(); ++i) {
    outcome = roundTrip(i, &nanos);
  }
  if (outcome.ok()) outcome = awaitQuiet();  // the counters' baseline: nothing in flight
  for (auto& w : watches_) {
    if (outcome.ok()) outcome = w.before();
  }
  start_ = Clock::now();
  callsBefore_ = clientCounters();
  const uint64_t pollsBefore = idle_->polls();
  for (uint64_t i = 0; i < measured() && outcome.ok(); ++i) {
    outcome = roundTrip(args_.warmup + i, &nanos);
    if (outcome.ok()) rtts_.push_back(nanos);
  }
  end_ = Clock::now();
  callsAfter_ = clientCounters();
  benchPolls_ = idle_->polls() - pollsBefore;
  if (outcome.ok()) outcome = awaitQuiet();
  return report(outcome);
}

}  // namespace

Exit runLatency(const BenchArgs& args) {
  return runAgainstTarget<LatencyRun>(args);
}

}  // namespace rdmamsg::cli::bench
