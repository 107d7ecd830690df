// `rdmamsg send`: streams messages with a bounded window of unacknowledged
// messages and exits 0 only when every one was confirmed.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>

#include "client/cli/commands.h"
#include "client/cli/idle_wait.h"
#include "client/cli/line_io.h"
#include "rdmamsg/client.h"

namespace rdmamsg::cli {
namespace {

// Sends messages and collects their completions; remembers the first
// failure and which messages were confirmed, so that a failed stream says
// where to resume. Ids are assigned 1, 2, 3… by a fresh client: the id of a
// message is its line number.
class Sender {
 public:
  Sender(Client& client, const SendArgs& args, std::string node, std::string service)
      : client_(client), args_(args), node_(std::move(node)), service_(std::move(service)) {}

  bool send(std::string_view text) {
    while (client_.inFlight() >= args_.window) {
      if (!awaitOne()) return false;
    }
    Result<uint64_t> id = client_.send(node_, service_, text);
    if (!id) return fail(id.status(), sent_ + 1);
    ++sent_;
    if (args_.progress && (sent_ & 1023) == 0) progress(false);
    return true;
  }

  // Waits for the completion of every message sent. After a message failed,
  // the others still in flight are collected too (the daemon answers each),
  // so that the report is complete; a lost daemon answers nothing more.
  void finish() {
    while (confirmed_ + failed_ < sent_ && connected_)
      awaitOne();
    if (args_.progress) progress(true);
  }

  Exit result() const {
    if (failure_.ok()) return Exit::ok;
    std::fprintf(stderr, "rdmamsg: send to %s/%s failed%s: %s\n", node_.c_str(), service_.c_str(),
                 failedId_ != 0 ? (" (message " + std::to_string(failedId_) + ")").c_str() : "",
                 failure_.toString().c_str());
    report();
    return exitFor(failure_);
  }

 private:
  bool awaitOne() {
    const Status st = client_.waitCompletion(c_, std::chrono::seconds(args_.timeoutSeconds));
    if (!st.ok()) {
      // No answer at all: the daemon is gone or silent; nothing more will come.
      connected_ = false;
      return fail(st, 0);
    }
    if (!c_.status.ok()) {
      ++failed_;
      return fail(c_.status, c_.msgId);
    }
    ++confirmed_;
    if (c_.msgId == prefix_ + 1) {
      ++prefix_;
      while (!confirmedAhead_.empty() && *confirmedAhead_.begin() == prefix_ + 1) {
        confirmedAhead_.erase(confirmedAhead_.begin());
        ++prefix_;
      }
    } else {
      confirmedAhead_.insert(c_.msgId);
    }
    if (args_.progress && (confirmed_ & 1023) == 0) progress(false);
    return true;
  }

  bool fail(const Status& st, uint64_t msgId) {
    if (failure_.ok()) {
      failure_ = st;
      failedId_ = msgId;
    }
    return false;
  }

  // What is known after a failure: how many were confirmed, the first
  // message not confirmed and whether it failed or its outcome is unknown.
  void report() const {
    const uint64_t firstOpen = prefix_ + 1;
    std::string first;
    if (firstOpen == failedId_)
      first = "failed (" + std::string(toString(failure_.code())) + ")";
    else if (firstOpen <= sent_)
      first = "has no known outcome";
    else
      first = "was not sent";
    // The run of confirmed messages from the first, when there is one.
    const std::string run =
        prefix_ == 0 ? "" : "messages 1-" + std::to_string(prefix_) + " all were; ";
    std::fprintf(stderr, "rdmamsg: %llu of %llu messages sent were confirmed; %smessage %llu %s",
                 static_cast<unsigned long long>(confirmed_),
                 static_cast<unsigned long long>(sent_), run.c_str(),
                 static_cast<unsigned long long>(firstOpen), first.c_str());
    if (!confirmedAhead_.empty())
      std::fprintf(stderr,
                   "; %zu later messages were confirmed too (resending from %llu repeats them)",
                   confirmedAhead_.size(), static_cast<unsigned long long>(firstOpen));
    std::fprintf(stderr, "\n");
  }

  // --progress: a live count on standard error, at most every 200 ms (and a
  // last one at the end); on a terminal it rewrites one line.
  void progress(bool last) {
    const auto now = std::chrono::steady_clock::now();
    if (!last && now - lastProgress_ < std::chrono::milliseconds(200)) return;
    lastProgress_ = now;
    std::fprintf(stderr, "%ssent %llu, confirmed %llu, in flight %zu%s", tty_ ? "\r" : "",
                 static_cast<unsigned long long>(sent_),
                 static_cast<unsigned long long>(confirmed_), client_.inFlight(),
                 tty_ && !last ? "" : "\n");
  }

  Client& client_;
  const SendArgs& args_;
  std::string node_;
  std::string service_;
  uint64_t sent_ = 0;
  uint64_t confirmed_ = 0;
  uint64_t failed_ = 0;
  uint64_t prefix_ = 0;                // messages 1..prefix_ are all confirmed
  std::set<uint64_t> confirmedAhead_;  // confirmed ids above prefix_ + 1
  bool connected_ = true;
  Completion c_;
  Status failure_;
  uint64_t failedId_ = 0;  // the message that failed first, 0 if none in particular
  const bool tty_ = ::isatty(STDERR_FILENO) == 1;
  std::chrono::steady_clock::time_point lastProgress_{};
};

// One message per line of standard input (without its newline). False when
// a send failed or standard input could not be read (`readError` is the errno).
bool sendStdinLines(Sender& sender, int& readError) {
  LineReader in(STDIN_FILENO);
  std::string_view line;
  while (in.next(line)) {
    if (!sender.send(line)) return false;
  }
  readError = in.error();
  return readError == 0;
}

}  // namespace

Exit runSend(const SendArgs& args) {
  const size_t slash = args.destination.find('/');
  if (slash == std::string::npos) {
    std::fprintf(stderr, "rdmamsg: send: destination must be NODE/SERVICE, got '%s'\n",
                 args.destination.c_str());
    return Exit::usage;
  }
  const std::string node = args.destination.substr(0, slash);
  const std::string service = args.destination.substr(slash + 1);
  ConnectOptions opts;
  opts.clientName = "rdmamsg-send";
  Result<Client> client = Client::connect(args.socket, opts);
  if (!client) {
    std::fprintf(stderr, "rdmamsg: send: %s\n", client.status().toString().c_str());
    return exitFor(client.status());
  }
  applyIdleStrategy(*client, args.idleStrategy);
  Sender sender(*client, args, node, service);
  int readError = 0;
  if (args.message)
    sender.send(*args.message);
  else
    sendStdinLines(sender, readError);  // stops at the first failure
  sender.finish();                      // what was sent is still confirmed, or reported
  const Exit e = sender.result();
  if (readError != 0) {
    std::fprintf(stderr, "rdmamsg: send: reading standard input: %s\n", std::strerror(readError));
    return e == Exit::ok ? Exit::failure : e;
  }
  return e;
}

}  // namespace rdmamsg::cli
