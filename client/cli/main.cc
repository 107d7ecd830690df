// rdmamsg: command-line client of rdmamsgd (status, listen, send, pub, sub,
// request, reply, bench).
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdlib>
#include <optional>

#include "client/cli/commands.h"
#include "config/units.h"
#include "rdmamsg/client.h"

namespace {

using rdmamsg::cli::BenchArgs;
using rdmamsg::cli::BenchMode;
using rdmamsg::cli::SubscribeArgs;

// A request's timeout: a duration with its unit (300ms, 5s, 1m), or a number
// of seconds (fractions allowed); 1 ms to 2^32 - 1 ms.
std::optional<std::chrono::milliseconds> parseRequestTimeout(const std::string& text) {
  std::chrono::milliseconds t{0};
  if (auto d = rdmamsg::config::parseDuration(text)) {
    t = *d.value;
  } else {
    char* end = nullptr;
    const double seconds = std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size() || !(seconds > 0) || seconds > 4.3e6)
      return std::nullopt;
    t = std::chrono::milliseconds(static_cast<int64_t>(std::ceil(seconds * 1000)));
  }
  if (t.count() < 1 || t.count() > 0xffffffffLL) return std::nullopt;
  return t;
}

// PATTERN and the options of a subscription (sub, reply).
void addSubscribeOptions(CLI::App* command, SubscribeArgs& args) {
  command
      ->add_option("PATTERN", args.pattern,
                   "Subject pattern: '*' matches one token, '>' (last) the rest")
      ->required();
  command->add_option("--queue,-q", args.queue,
                      "Join queue group GROUP: each message goes to one of its members");
  command->add_option("--count,-n", args.count, "Exit 0 after N messages")
      ->check(CLI::PositiveNumber);
  command
      ->add_option("--policy", args.policy,
                   "When --pending messages wait: drop what comes for this subscription (it "
                   "slows nobody) or block its publishers (lossless)")
      ->check(CLI::IsMember({"drop", "block"}))
      ->capture_default_str();
  command->add_option("--pending", args.pending,
                      "Messages delivered and not taken before the policy applies (default: the "
                      "daemon's pending_limit)");
}

// --idle-strategy, for the commands that wait on the daemon.
void addIdleOption(CLI::App* command, std::string& into) {
  command
      ->add_option("--idle-strategy", into,
                   "How to wait for the daemon over shared memory: sleep (at once), adaptive "
                   "(spin 50 us first) or busy (spin, never sleep) (default: $RDMAMSG_IDLE, "
                   "else sleep)")
      ->check(CLI::IsMember({"sleep", "adaptive", "busy"}));
}

// The options every bench mode shares.
void addCommonBenchOptions(CLI::App* mode, BenchArgs& args) {
  mode->add_option("--size", args.size, "Payload bytes (at least 16; suffixes like KiB, MiB)")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  mode->add_option("--timeout", args.timeoutSeconds,
                   "Give up after this many seconds without progress")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  mode->add_flag("--json", args.json, "Print one JSON object (sink, echo: one per report)");
  addIdleOption(mode, args.idleStrategy);
}

// `bench throughput|latency|sink|echo`; each mode sets args.mode when parsed.
CLI::App* addBenchCommands(CLI::App& app, BenchArgs& args) {
  auto* bench = app.add_subcommand("bench", "Measure throughput and round-trip latency");
  bench->require_subcommand(1);
  auto mode = [&args](BenchMode m) { return [&args, m] { args.mode = m; }; };

  auto* tput = bench->add_subcommand(
      "throughput", "Stream COUNT messages to NODE/SERVICE from SENDERS connections");
  tput->add_option("DESTINATION", args.target, "NODE/SERVICE")->required();
  tput->add_option("--sink-socket", args.peerSocket,
                   "Register SERVICE on this daemon's socket and receive here (else a remote "
                   "`bench sink` must be running)");
  auto* count = tput->add_option("--count", args.count, "Messages in all (default 1000000)")
                    ->check(CLI::PositiveNumber);
  tput->add_option("--seconds", args.seconds, "Send for this long instead of --count")
      ->check(CLI::PositiveNumber)
      ->excludes(count);
  tput->add_option("--senders", args.senders, "Sender connections")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  tput->add_option("--window", args.window, "Unacknowledged messages per sender")
      ->check(CLI::Range(1, 1 << 24))
      ->capture_default_str();
  tput->add_flag("--copy-send", args.copySend,
                 "Send messages of 16 KiB and more from a buffer of the bench's (send(), "
                 "which copies it) instead of writing them where they are sent from (claim() "
                 "and commit())");
  addCommonBenchOptions(tput, args);
  tput->parse_complete_callback(mode(BenchMode::throughput));

  auto* lat = bench->add_subcommand("latency", "Round trips through an echo of NODE/SERVICE");
  lat->add_option("DESTINATION", args.target, "NODE/SERVICE")->required();
  lat->add_option("--echo-socket", args.peerSocket,
                  "Run the echo responder on this daemon's socket (else a remote `bench echo` "
                  "must be running)");
  lat->add_option("--count", args.count, "Measured round trips (default 100000)")
      ->check(CLI::PositiveNumber);
  lat->add_option("--warmup", args.warmup, "Round trips before measuring")->capture_default_str();
  addCommonBenchOptions(lat, args);
  lat->parse_complete_callback(mode(BenchMode::latency));

  auto* sink = bench->add_subcommand("sink", "Register SERVICE, count and check what arrives");
  sink->add_option("SERVICE", args.target, "Service name to register")->required();
  sink->add_option("--count", args.count, "Exit after N messages")->check(CLI::PositiveNumber);
  sink->add_flag("--json", args.json, "Print each report as one line of JSON");
  addIdleOption(sink, args.idleStrategy);
  sink->parse_complete_callback(mode(BenchMode::sink));

  auto* echo = bench->add_subcommand("echo", "Register SERVICE, send every message back");
  echo->add_option("SERVICE", args.target, "Service name to register")->required();
  echo->add_option("--count", args.count, "Exit after echoing N messages")
      ->check(CLI::PositiveNumber);
  echo->add_flag("--json", args.json, "Print the summary as JSON");
  addIdleOption(echo, args.idleStrategy);
  echo->parse_complete_callback(mode(BenchMode::echo));
  return bench;
}

// `pub`, `sub`, `request` and `reply`: their arguments and commands.
struct SubjectCommands {
  rdmamsg::cli::PubArgs pubArgs;
  rdmamsg::cli::SubscribeArgs subArgs;
  rdmamsg::cli::RequestArgs requestArgs;
  rdmamsg::cli::ReplyArgs replyArgs;
  CLI::App* pub = nullptr;
  CLI::App* sub = nullptr;
  CLI::App* request = nullptr;
  CLI::App* reply = nullptr;
};

void addSubjectCommands(CLI::App& app, SubjectCommands& c) {
  c.pub = app.add_subcommand(
      "pub",
      "Publish MESSAGE (or each line of stdin) to SUBJECT; exit 0 once every subscription it "
      "matched took it or dropped it (10: nothing matched)");
  c.pub->add_option("SUBJECT", c.pubArgs.subject, "Subject (dot-separated tokens)")->required();
  c.pub->add_option("MESSAGE", c.pubArgs.message, "Message text (default: stdin, one per line)");
  c.pub
      ->add_option("--timeout", c.pubArgs.timeoutSeconds,
                   "Seconds to wait for each publish's outcome before giving up")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  c.pub->add_flag("--counts", c.pubArgs.counts,
                  "Print each publish's outcome: subscriptions matched, taken, dropped");

  c.sub = app.add_subcommand("sub",
                             "Subscribe to PATTERN and print each message received, one per line");
  addSubscribeOptions(c.sub, c.subArgs);
  c.sub->add_flag("--with-subject", c.subArgs.withSubject, "Print each message as SUBJECT MESSAGE");

  c.request = app.add_subcommand("request",
                                 "Send MESSAGE as a request to SUBJECT and print the first reply");
  c.request->add_option("SUBJECT", c.requestArgs.subject, "Subject (dot-separated tokens)")
      ->required();
  c.request->add_option("MESSAGE", c.requestArgs.message, "Request text (default: empty)");
  c.request
      ->add_option_function<std::string>(
          "--timeout",
          [&c](const std::string& text) {
            c.requestArgs.timeout = *parseRequestTimeout(text);  // checked below
          },
          "How long to wait for a reply: a duration (300ms, 5s, 1m) or seconds (default: 5s)")
      ->check([](const std::string& text) {
        auto t = parseRequestTimeout(text);
        return t ? std::string() : "'" + text + "' is not a duration from 1ms to 49 days";
      });

  c.reply = app.add_subcommand(
      "reply",
      "Subscribe to PATTERN and answer each request: --echo it (default), --text or --exec");
  addSubscribeOptions(c.reply, c.replyArgs.sub);
  auto* echo = c.reply->add_flag("--echo", c.replyArgs.echo,
                                 "Answer each request with itself (the default)");
  auto* text = c.reply->add_option("--text", c.replyArgs.text, "Answer every request with TEXT")
                   ->excludes(echo);
  c.reply
      ->add_option("--exec", c.replyArgs.exec,
                   "Answer with the output of a shell command, the request on its stdin")
      ->excludes(text)
      ->excludes(echo);
}

// Runs the subject command parsed, if one was.
std::optional<rdmamsg::cli::Exit> runSubjectCommand(SubjectCommands& c, const std::string& socket) {
  using namespace rdmamsg::cli;
  c.pubArgs.socket = c.subArgs.socket = c.requestArgs.socket = c.replyArgs.sub.socket = socket;
  if (c.pub->parsed()) return runPub(c.pubArgs);
  if (c.sub->parsed()) return runSub(c.subArgs);
  if (c.request->parsed()) return runRequest(c.requestArgs);
  if (c.reply->parsed()) return runReply(c.replyArgs);
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace rdmamsg::cli;
  CLI::App app{"rdmamsg - send and receive messages through the local rdmamsgd"};
  app.require_subcommand(1);
  app.footer(exitCodeHelp());
  std::string socket = rdmamsg::Client::defaultSocketPath();
  app.add_option("--socket", socket,
                 "rdmamsgd's Unix socket (default: $RDMAMSG_SOCKET, else "
                 "/run/rdmamsg/rdmamsgd.sock)")
      ->capture_default_str();

  StatusArgs statusArgs;
  auto* status = app.add_subcommand("status", "Show this node, its peers and local services");
  status->add_flag("--json", statusArgs.json, "Print the daemon's JSON status as is");

  StatusArgs metricsArgs;
  metricsArgs.metrics = true;
  auto* metrics = app.add_subcommand(
      "metrics",
      "Print the daemon's counters in the OpenMetrics text format (as Prometheus reads)");

  ListenArgs listenArgs;
  auto* listen = app.add_subcommand(
      "listen", "Register SERVICE and print each message received, one per line");
  listen->add_option("SERVICE", listenArgs.service, "Service name to register")->required();
  listen->add_option("--count,-n", listenArgs.count, "Exit 0 after N messages")
      ->check(CLI::PositiveNumber);
  addIdleOption(listen, listenArgs.idleStrategy);

  SendArgs sendArgs;
  auto* send = app.add_subcommand(
      "send",
      "Send MESSAGE (or each line of stdin) to NODE/SERVICE; exit 0 once every message was "
      "taken by the listening application");
  send->add_option("DESTINATION", sendArgs.destination, "NODE/SERVICE")->required();
  send->add_option("MESSAGE", sendArgs.message, "Message text (default: stdin, one per line)");
  send->add_option("--window", sendArgs.window, "Maximum unacknowledged messages in flight")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  send->add_option("--timeout", sendArgs.timeoutSeconds,
                   "Seconds to wait for each confirmation before giving up")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  send->add_flag("--progress", sendArgs.progress,
                 "Show how many messages were sent and confirmed, as the stream goes");
  addIdleOption(send, sendArgs.idleStrategy);

  SubjectCommands subjects;
  addSubjectCommands(app, subjects);

  BenchArgs benchArgs;
  auto* bench = addBenchCommands(app, benchArgs);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);  // prints help or the error
    return rc == 0 ? 0 : static_cast<int>(Exit::usage);
  }
  statusArgs.socket = metricsArgs.socket = listenArgs.socket = sendArgs.socket = benchArgs.socket =
      socket;
  if (std::optional<Exit> done = runSubjectCommand(subjects, socket))
    return static_cast<int>(*done);
  if (status->parsed()) return static_cast<int>(runStatus(statusArgs));
  if (metrics->parsed()) return static_cast<int>(runStatus(metricsArgs));
  if (listen->parsed()) return static_cast<int>(runListen(listenArgs));
  if (bench->parsed()) return static_cast<int>(runBench(benchArgs));
  return static_cast<int>(runSend(sendArgs));
}
