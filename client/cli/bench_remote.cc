// The remote halves of `rdmamsg bench` for runs across hosts: `bench sink`
// (receives and counts, checks each sender's order, prints its own rate) and
// `bench echo` (the echo responder of `bench latency`).
#include <poll.h>

#include <cerrno>
#include <cstdio>

#include "client/cli/bench.h"
#include "client/cli/idle_wait.h"

namespace rdmamsg::cli::bench {
namespace {

constexpr auto kIdleReport = std::chrono::seconds(1);  // a burst ends after this quiet time
constexpr auto kWaitSlice = std::chrono::milliseconds(200);

Result<Client> connectAndRegister(const BenchArgs& args, const char* name) {
  ConnectOptions opts;
  opts.clientName = name;
  Result<Client> c = Client::connect(args.socket, opts);
  if (!c) return c;
  applyIdleStrategy(*c, args.idleStrategy);
  if (Status st = c->registerService(args.target); !st.ok()) return st;
  return c;
}

// Counts messages per burst and checks the order of each sender's stream (one
// stream per node, service and sender index; sequence 0 starts a stream anew).
class Sink {
 public:
  explicit Sink(const BenchArgs& args) : args_(args) {}
  Exit run(Client& client);

 private:
  struct Stream {
    std::string node, service;
    uint32_t sender = 0;
    uint64_t next = 0;
  };
  void account(const Message& m);
  Stream& streamOf(const Message& m, uint32_t sender);
  void report();

  const BenchArgs& args_;
  std::vector<Stream> streams_;  // few: a linear search allocates nothing
  uint64_t total_ = 0, burst_ = 0, bytes_ = 0, orderErrors_ = 0;
  Clock::time_point first_, last_;
};

Sink::Stream& Sink::streamOf(const Message& m, uint32_t sender) {
  for (auto& s : streams_) {
    if (s.sender == sender && s.node == m.srcNode && s.service == m.srcService) return s;
  }
  return streams_.emplace_back(Stream{m.srcNode, m.srcService, sender, 0});
}

void Sink::account(const Message& m) {
  last_ = Clock::now();
  if (burst_ == 0) first_ = last_;
  ++burst_;
  ++total_;
  bytes_ += m.payload.size();
  const Header h = readHeader(m.payload);
  if (!h.valid) {
    ++orderErrors_;
    return;
  }
  Stream& s = streamOf(m, h.sender);
  if (h.seq != 0 && h.seq != s.next) ++orderErrors_;
  s.next = h.seq + 1;
}

void Sink::report() {
  const double seconds = secondsBetween(first_, last_);
  const double rate = seconds > 0 ? static_cast<double>(burst_) / seconds : 0;
  const double mbps = seconds > 0 ? static_cast<double>(bytes_) / seconds / 1e6 : 0;
  if (args_.json) {
    const Json j = {
        {"mode", "sink"},          {"service", args_.target},      {"received", burst_},
        {"bytes", bytes_},         {"seconds", seconds},           {"msgs_per_second", rate},
        {"mb_per_second", mbps},   {"order_errors", orderErrors_}, {"streams", streams_.size()},
        {"total_received", total_}};
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf(
        "sink %s: %llu messages, %llu bytes in %.3f s: %.0f msgs/s, %.1f MB/s, %llu "
        "order errors (%zu streams)\n",
        args_.target.c_str(), static_cast<unsigned long long>(burst_),
        static_cast<unsigned long long>(bytes_), seconds, rate, mbps,
        static_cast<unsigned long long>(orderErrors_), streams_.size());
  }
  std::fflush(stdout);
  burst_ = bytes_ = 0;
}

Exit Sink::run(Client& client) {
  Message m;
  while (!stopRequested() && (!args_.count || total_ < *args_.count)) {
    if (!client.tryReceive(m)) {
      const Status st = client.receive(m, kWaitSlice);
      if (st.code() == Errc::timeout) {
        if (burst_ > 0 && Clock::now() - last_ >= kIdleReport) report();
        continue;
      }
      if (!st.ok()) return fail("sink " + args_.target, st);
    }
    account(m);
  }
  if (burst_ > 0 || total_ == 0) report();
  return orderErrors_ == 0 ? Exit::ok : Exit::failure;
}

}  // namespace

void Echoer::serviceIo() {
  // Completions first: reading them may queue messages, which the receive
  // loop then takes. Its last call, finding nothing queued, reads the socket
  // (completions read then wait in their queue for the next call) and writes
  // the echoes.
  while (client_.pollCompletion(c_)) {
    if (!c_.status.ok()) noteFailure(c_.status);
  }
  while (client_.tryReceive(m_)) {
    if (m_.srcService.empty()) {
      noteFailure(Status(Errc::bad_request,
                         "message from " + m_.srcNode + " has no sender service to echo to"));
      continue;
    }
    Result<uint64_t> id = client_.send(m_.srcNode, m_.srcService, m_.payload, service_);
    if (!id) {
      noteFailure(id.status());
      continue;
    }
    ++echoed_;
    // Writes the echo and the confirmation together; a lost connection
    // shows in the next receive.
    static_cast<void>(client_.confirmReceived());
  }
  if (!client_.connectionStatus().ok() && failure_.ok()) failure_ = client_.connectionStatus();
}

Exit runSink(const BenchArgs& args) {
  installStopHandlers();
  Result<Client> client = connectAndRegister(args, "rdmamsg-bench-sink");
  if (!client) return fail("sink " + args.target, client.status());
  Sink sink(args);
  return sink.run(*client);
}

Exit runEcho(const BenchArgs& args) {
  installStopHandlers();
  Result<Client> client = connectAndRegister(args, "rdmamsg-bench-echo");
  if (!client) return fail("echo " + args.target, client.status());
  Echoer echo(*client, args.target);
  IdleWait idle(client->idleStrategy());
  Client* const clients[1] = {&*client};
  // A failed echo (its sender gone) is counted, not fatal; a lost daemon is.
  while (!stopRequested() && client->connectionStatus().ok()) {
    if (args.count && echo.echoed() >= *args.count && client->inFlight() == 0) break;
    pollfd p{client->fd(), static_cast<short>(POLLIN | (client->wantsWrite() ? POLLOUT : 0)), 0};
    const uint64_t before = echo.echoed();
    if (idle.poll({&p, 1}, clients, static_cast<int>(kWaitSlice.count())) < 0 && errno != EINTR) {
      return fail("echo " + args.target, Status(Errc::io_error, "poll failed"));
    }
    if (p.revents != 0) echo.serviceIo();
    if (echo.echoed() != before) idle.worked();
  }
  if (args.json) {
    const Json j = {{"mode", "echo"},
                    {"service", args.target},
                    {"echoed", echo.echoed()},
                    {"failed", echo.failed()}};
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("echo %s: echoed %llu messages, %llu failed\n", args.target.c_str(),
                static_cast<unsigned long long>(echo.echoed()),
                static_cast<unsigned long long>(echo.failed()));
  }
  std::fflush(stdout);
  if (!client->connectionStatus().ok()) {
    return fail("echo " + args.target, client->connectionStatus());
  }
  if (!echo.failure().ok()) fail("echo " + args.target + " (first failure)", echo.failure());
  return Exit::ok;
}

}  // namespace rdmamsg::cli::bench
