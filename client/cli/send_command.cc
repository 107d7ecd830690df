// `rdmamsg send`: streams messages with a bounded window of unacknowledged
// messages and exits 0 only when every one was confirmed.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "client/cli/commands.h"
#include "client/cli/line_io.h"
#include "rdmamsg/client.h"

namespace rdmamsg::cli {
namespace {

// Sends messages and collects their completions; remembers the first failure.
class Sender {
 public:
  Sender(Client& client, const SendArgs& args, std::string node, std::string service)
      : client_(client), args_(args), node_(std::move(node)), service_(std::move(service)) {}

  bool send(std::string_view text) {
    while (client_.inFlight() >= args_.window) {
      if (!awaitOne()) return false;
    }
    Result<uint64_t> id = client_.send(node_, service_, text);
    if (!id) return fail(id.status(), 0);
    ++sent_;
    return true;
  }

  bool finish() {
    while (confirmed_ < sent_) {
      if (!awaitOne()) return false;
    }
    return true;
  }

  Exit result() const {
    if (failure_.ok()) return Exit::ok;
    std::fprintf(stderr, "rdmamsg: send to %s/%s failed%s: %s\n", node_.c_str(), service_.c_str(),
                 failedAt_.c_str(), failure_.toString().c_str());
    return exitFor(failure_);
  }

 private:
  bool awaitOne() {
    const Status st = client_.waitCompletion(c_, std::chrono::seconds(args_.timeoutSeconds));
    if (!st.ok()) return fail(st, 0);
    if (!c_.status.ok()) return fail(c_.status, c_.msgId);
    ++confirmed_;
    return true;
  }

  bool fail(const Status& st, uint64_t msgId) {
    failure_ = st;
    // Ids are assigned 1, 2, 3… by a fresh client: the id is the line number.
    if (msgId != 0) failedAt_ = " (message " + std::to_string(msgId) + ")";
    return false;
  }

  Client& client_;
  const SendArgs& args_;
  std::string node_;
  std::string service_;
  uint64_t sent_ = 0;
  uint64_t confirmed_ = 0;
  Completion c_;
  Status failure_;
  std::string failedAt_;
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
  Sender sender(*client, args, node, service);
  int readError = 0;
  const bool ok = args.message ? sender.send(*args.message) : sendStdinLines(sender, readError);
  if (ok || readError != 0) sender.finish();  // what was read is still confirmed
  if (readError != 0) {
    std::fprintf(stderr, "rdmamsg: send: reading standard input: %s\n", std::strerror(readError));
    return Exit::failure;
  }
  return sender.result();
}

}  // namespace rdmamsg::cli
