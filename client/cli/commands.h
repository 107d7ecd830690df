// The rdmamsg command-line tool's subcommands and exit codes.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "rdmamsg/client.h"
#include "rdmamsg/status.h"

namespace rdmamsg::cli {

// Process exit codes (documented in --help and docs/cli.md).
enum class Exit : int {
  ok = 0,
  failure = 1,            // anything not listed below
  usage = 2,              // bad command line
  no_daemon = 3,          // cannot connect to rdmamsgd, or it closed the connection
  unknown_node = 4,       // destination node not configured
  unknown_service = 5,    // no listener for the service on the destination node
  undelivered = 6,        // peer unreachable or no confirmation in time
  too_large = 7,          // message larger than the configured maximum
  rejected = 8,           // refused by the daemon (duplicate service, bad request, busy, shutdown)
  permission_denied = 9,  // the daemon's local_policy refuses this user the request
  nobody = 10,            // no subscription matched (no_subscribers, no_responders)
};

// The exit code for a failed Status.
Exit exitFor(const Status& status);
// Prints "rdmamsg: WHAT: STATUS" on stderr; the exit code for it.
Exit report(std::string_view what, const Status& st);
// Connects to rdmamsgd at `socket` as client `name`.
Result<Client> connectTo(const std::string& socket, const char* name);

// The exit-code table for --help.
std::string exitCodeHelp();

struct StatusArgs {
  std::string socket;
  bool json = false;
  bool metrics = false;  // rdmamsg metrics: OpenMetrics text
};
struct ListenArgs {
  std::string socket;
  std::string idleStrategy;  // --idle-strategy; empty: the library's (RDMAMSG_IDLE, sleep)
  std::string service;
  std::optional<uint64_t> count;
};
struct SendArgs {
  std::string socket;
  std::string idleStrategy;  // --idle-strategy; empty: the library's (RDMAMSG_IDLE, sleep)
  std::string destination;   // NODE/SERVICE
  std::optional<std::string> message;
  size_t window = 4096;
  unsigned timeoutSeconds = 60;
  bool progress = false;  // live count on stderr
};

// Subjects: `rdmamsg pub`, `sub`, `request`, `reply` (docs/cli.md).
struct SubscribeArgs {
  std::string socket;
  std::string pattern;
  std::string queue;  // --queue: a queue group
  std::string policy = "drop";
  uint32_t pending = 0;  // --pending: 0, the daemon's pending_limit
  std::optional<uint64_t> count;
  bool withSubject = false;  // sub: print "SUBJECT PAYLOAD"
};
struct PubArgs {
  std::string socket;
  std::string subject;
  std::optional<std::string> message;
  unsigned timeoutSeconds = 60;
  bool counts = false;  // print each publish's matched/taken/dropped
};
struct RequestArgs {
  std::string socket;
  std::string subject;
  std::string message;
  std::chrono::milliseconds timeout{5000};
};
struct ReplyArgs {
  SubscribeArgs sub;
  bool echo = false;                // --echo: the request itself (also without --text, --exec)
  std::optional<std::string> text;  // --text: this reply to every request
  std::string exec;                 // --exec: a shell command's output (the request on its stdin)
};

// `rdmamsg bench` (docs/cli.md): throughput and latency, and the remote
// halves (sink, echo) for runs across hosts.
enum class BenchMode { throughput, latency, sink, echo };
std::string_view toString(BenchMode mode);

struct BenchArgs {
  BenchMode mode = BenchMode::throughput;
  std::string socket;      // the senders' (measuring client's) daemon
  std::string peerSocket;  // --sink-socket / --echo-socket; empty: the other side runs elsewhere
  std::string target;      // NODE/SERVICE (throughput, latency) or SERVICE (sink, echo)
  uint64_t size = 64;      // payload bytes
  std::optional<uint64_t> count;
  std::optional<double> seconds;
  unsigned senders = 1;
  size_t window = 65536;  // unacknowledged messages per sender connection
  bool copySend = false;  // --copy-send: trySend() of a buffer instead of claim() + tryCommit()
  uint64_t warmup = 1000;
  unsigned timeoutSeconds = 30;  // longest time without progress
  bool json = false;
  std::string idleStrategy;  // --idle-strategy; empty: the library's (RDMAMSG_IDLE, sleep)
};

Exit runStatus(const StatusArgs& args);
Exit runListen(const ListenArgs& args);
Exit runSend(const SendArgs& args);
Exit runBench(const BenchArgs& args);
Exit runPub(const PubArgs& args);
Exit runSub(const SubscribeArgs& args);
Exit runRequest(const RequestArgs& args);
Exit runReply(const ReplyArgs& args);

}  // namespace rdmamsg::cli
