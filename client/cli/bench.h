// Internals shared by the `rdmamsg bench` modes: the payload header that
// carries a sequence number, clock and percentile helpers, stop signals, and
// the daemon status snapshots whose deltas a run reports.
#pragma once

#include <cstdio>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "client/cli/commands.h"
#include "client/cli/stop_signal.h"
#include "rdmamsg/client.h"

namespace rdmamsg::cli::bench {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;

// Every bench payload starts with this header, written in place into a
// preallocated buffer: u64 sequence number, u32 sender index, u32 magic
// (host byte order; the rest of the payload is filler).
inline constexpr size_t kHeaderSize = 16;
inline constexpr uint32_t kMagic = 0x31424d52;  // "RMB1"

struct Header {
  uint64_t seq = 0;
  uint32_t sender = 0;
  bool valid = false;  // false: too short or wrong magic (not a bench message)
};
void writeHeader(std::span<std::byte> payload, uint64_t seq, uint32_t sender);
Header readHeader(std::span<const std::byte> payload);

// "NODE/SERVICE" split in two; nullopt without a slash or with an empty part.
struct Destination {
  std::string node;
  std::string service;
};
std::optional<Destination> parseDestination(std::string_view text);

double secondsBetween(Clock::time_point from, Clock::time_point to);

// Nearest-rank percentiles of round-trip times, in microseconds.
struct LatencySummary {
  double p50 = 0, p99 = 0, p999 = 0, mean = 0, min = 0, max = 0;
};
// Sorts `nanos` in place.
LatencySummary summarize(std::vector<int64_t>& nanos);

// The system calls of the bench's clients during a run (Client::counters()
// before and after, summed over its connections) and of the bench's own
// event loop (IdleWait::polls), per message: "clients" in the JSON report.
ClientCounters& operator+=(ClientCounters& a, const ClientCounters& b);
Json clientCalls(const ClientCounters& before, const ClientCounters& after, double messages);

// Parses the NODE/SERVICE target of `args` and runs a `Run` (a throughput or
// latency run) against it.
template <typename Run>
Exit runAgainstTarget(const BenchArgs& args) {
  std::optional<Destination> dest = parseDestination(args.target);
  if (!dest) {
    std::fprintf(stderr, "rdmamsg: bench: destination must be NODE/SERVICE, got '%s'\n",
                 args.target.c_str());
    return Exit::usage;
  }
  installStopHandlers();
  Run run(args, std::move(*dest));
  return run.run();
}
// Prints "rdmamsg: bench: WHAT: STATUS" on stderr; the matching exit code.
Exit fail(std::string_view what, const Status& status);

// One daemon's status before and after a run; its JSON report is the delta of
// every counter (see docs/cli.md, "bench").
class DaemonWatch {
 public:
  DaemonWatch(std::string role, std::string socket)
      : role_(std::move(role)), socket_(std::move(socket)) {}
  Status before() { return fetch(before_); }
  Status after() { return fetch(after_); }
  const std::string& role() const { return role_; }
  // The delta report; `messages` is the divisor of the per-message ratios.
  Json report(uint64_t messages) const;

 private:
  Status fetch(Json& into);
  std::string role_, socket_;
  Json before_, after_;
};

// Sends every message received for its service back to the sender's node
// and service (the remote half of `bench latency`).
class Echoer {
 public:
  // Confirms each message with its echo, in the same write: a message counts
  // as taken once its echo is queued (Client::confirmReceived).
  Echoer(Client& client, std::string service) : client_(client), service_(std::move(service)) {
    client_.setConfirmOnReceive(false);
  }
  // Echoes whatever has arrived (reading the socket when nothing is queued,
  // which also writes the echoes) and collects the echoes' completions.
  void serviceIo();
  uint64_t echoed() const { return echoed_; }
  uint64_t failed() const { return failed_; }
  // The first failure (a failed echo, a sender without a service, a lost connection).
  const Status& failure() const { return failure_; }

 private:
  void noteFailure(const Status& st) {
    ++failed_;
    if (failure_.ok()) failure_ = st;
  }
  Client& client_;
  std::string service_;
  Message m_;
  Completion c_;
  uint64_t echoed_ = 0, failed_ = 0;
  Status failure_;
};

// Readable lines for the daemons' reports (the table output).
void printDaemonTable(const Json& daemons);

// The modes (bench_command.cc, bench_latency.cc).
Exit runThroughput(const BenchArgs& args);
Exit runSink(const BenchArgs& args);
Exit runLatency(const BenchArgs& args);
Exit runEcho(const BenchArgs& args);

}  // namespace rdmamsg::cli::bench
