// The subject subcommands (docs/cli.md): `rdmamsg pub` publishes MESSAGE or
// each line of stdin and exits 0 once every publish was taken by every
// subscription it matched; `sub` prints what a subscription receives;
// `request` prints a request's reply; `reply` answers requests (echo, a
// fixed text, or a shell command's output).
#include <fcntl.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "client/cli/commands.h"
#include "client/cli/line_io.h"
#include "client/cli/stop_signal.h"
#include "rdmamsg/client.h"

extern char** environ;

namespace rdmamsg::cli {
namespace {

std::span<const std::byte> bytesOf(std::string_view s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

Result<uint64_t> subscribeWith(Client& client, const SubscribeArgs& args) {
  SubscribeOptions opts;
  opts.group = args.queue;
  opts.policy = args.policy == "block" ? SlowConsumer::block : SlowConsumer::drop;
  opts.pendingLimit = args.pending;
  return client.subscribe(args.pattern, opts);
}

// Publishes and collects completions, at most kWindow in flight; the first
// failure is kept.
class Publisher {
 public:
  static constexpr size_t kWindow = 1024;

  Publisher(Client& client, const PubArgs& args) : client_(client), args_(args) {}

  bool publish(std::string_view text) {
    while (client_.inFlight() >= kWindow) {
      if (!awaitOne()) return false;
    }
    Result<uint64_t> id = client_.publish(args_.subject, text);
    if (!id) return fail(id.status());
    ++sent_;
    return true;
  }

  // Waits for every outcome, then says what came of them: how many
  // subscriptions matched, took and dropped the publishes, in all.
  Exit finish() {
    while (done_ < sent_ && connected_)
      awaitOne();
    std::printf("published %llu: matched %llu, taken %llu, dropped %llu\n",
                static_cast<unsigned long long>(done_), static_cast<unsigned long long>(matched_),
                static_cast<unsigned long long>(taken_), static_cast<unsigned long long>(dropped_));
    std::fflush(stdout);
    if (failure_.ok()) return Exit::ok;
    return report("pub " + args_.subject, failure_);
  }

 private:
  bool awaitOne() {
    Completion c;
    const Status st = client_.waitCompletion(c, std::chrono::seconds(args_.timeoutSeconds));
    if (!st.ok()) {
      connected_ = false;
      return fail(st);
    }
    ++done_;
    matched_ += c.matched;
    taken_ += c.taken;
    dropped_ += c.dropped;
    if (args_.counts) {
      const std::string_view reason = toString(c.status.code());
      std::printf("%llu %.*s matched=%u taken=%u dropped=%u\n",
                  static_cast<unsigned long long>(c.msgId), static_cast<int>(reason.size()),
                  reason.data(), c.matched, c.taken, c.dropped);
    }
    if (!c.status.ok()) return fail(c.status);
    if (c.dropped != 0 && failure_.ok() && !args_.counts) {
      std::fprintf(stderr, "rdmamsg: pub %s: message %llu dropped by %u slow subscriber(s)\n",
                   args_.subject.c_str(), static_cast<unsigned long long>(c.msgId), c.dropped);
    }
    return true;
  }

  bool fail(const Status& st) {
    if (failure_.ok()) failure_ = st;
    return false;
  }

  Client& client_;
  const PubArgs& args_;
  uint64_t sent_ = 0, done_ = 0;
  uint64_t matched_ = 0, taken_ = 0, dropped_ = 0;
  bool connected_ = true;
  Status failure_;
};

// Runs `command` with /bin/sh, `input` on its standard input; its standard
// output, or the reason it could not run.
Result<std::string> runCommand(const std::string& command, std::span<const std::byte> input) {
  const int in = memfd_create("rdmamsg-request", MFD_CLOEXEC);
  if (in < 0) return Status(Errc::io_error, std::string("memfd_create: ") + std::strerror(errno));
  int outPipe[2] = {-1, -1};
  std::string output;
  Status st;
  if (::write(in, input.data(), input.size()) != static_cast<ssize_t>(input.size()) ||
      ::lseek(in, 0, SEEK_SET) != 0 || ::pipe2(outPipe, O_CLOEXEC) != 0) {
    st = Status(Errc::io_error, std::string("preparing the command: ") + std::strerror(errno));
  } else {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in, STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&fa, outPipe[1], STDOUT_FILENO);
    const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, "/bin/sh", &fa, nullptr, const_cast<char**>(argv), environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(outPipe[1]);
    if (rc != 0) {
      st = Status(Errc::io_error, std::string("/bin/sh: ") + std::strerror(rc));
    } else {
      char buf[65536];
      for (ssize_t n; (n = ::read(outPipe[0], buf, sizeof buf)) != 0;) {
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) break;
        output.append(buf, static_cast<size_t>(n));
      }
      int status = 0;
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        st = Status(
            Errc::bad_request,
            "'" + command + "' failed (status " +
                std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status)) +
                ")");
    }
    ::close(outPipe[0]);
  }
  ::close(in);
  if (!st.ok()) return st;
  return output;
}

}  // namespace

Exit runPub(const PubArgs& args) {
  auto client = connectTo(args.socket, "rdmamsg-pub");
  if (!client) return report("pub", client.status());
  Publisher pub(*client, args);
  if (args.message) {
    pub.publish(*args.message);
  } else {
    LineReader in(STDIN_FILENO);
    for (std::string_view line; in.next(line);) {
      if (!pub.publish(line)) break;
    }
    if (in.error() != 0) {
      std::fprintf(stderr, "rdmamsg: pub: reading standard input: %s\n", std::strerror(in.error()));
      pub.finish();
      return Exit::failure;
    }
  }
  return pub.finish();
}

Exit runSub(const SubscribeArgs& args) {
  installStopHandlers();
  auto client = connectTo(args.socket, "rdmamsg-sub");
  if (!client) return report("sub", client.status());
  Result<uint64_t> sub = subscribeWith(*client, args);
  if (!sub) return report("sub " + args.pattern, sub.status());
  // A message counts as taken once it is written out.
  client->setConfirmOnReceive(false);
  LineWriter out(STDOUT_FILENO);
  Message m;
  uint64_t received = 0;
  bool written = true;
  auto flushAndConfirm = [&] {
    if (!out.flush()) return false;
    static_cast<void>(client->confirmReceived());
    return true;
  };
  while (written && !stopRequested() && (!args.count || received < *args.count)) {
    if (!client->tryReceive(m)) {
      written = flushAndConfirm();
      const Status st = client->receive(m, std::chrono::milliseconds(200));
      if (st.code() == Errc::timeout) continue;
      if (!st.ok()) {
        flushAndConfirm();
        return report("sub " + args.pattern, st);
      }
    }
    ++received;
    written =
        args.withSubject ? out.write(m.subject + " " + std::string(m.text())) : out.write(m.text());
  }
  if (!flushAndConfirm()) {
    std::fprintf(stderr, "rdmamsg: sub %s: writing standard output: %s\n", args.pattern.c_str(),
                 std::strerror(out.error()));
    return Exit::failure;
  }
  return Exit::ok;
}

Exit runRequest(const RequestArgs& args) {
  auto client = connectTo(args.socket, "rdmamsg-request");
  if (!client) return report("request", client.status());
  Message reply;
  const Status st =
      client->requestAndWait(args.subject, bytesOf(args.message), reply, args.timeout);
  if (!st.ok()) return report("request " + args.subject, st);
  LineWriter out(STDOUT_FILENO);
  if (!out.write(reply.text()) || !out.flush()) return Exit::failure;
  return Exit::ok;
}

Exit runReply(const ReplyArgs& args) {
  installStopHandlers();
  auto client = connectTo(args.sub.socket, "rdmamsg-reply");
  if (!client) return report("reply", client.status());
  Result<uint64_t> sub = subscribeWith(*client, args.sub);
  if (!sub) return report("reply " + args.sub.pattern, sub.status());
  Message m;
  uint64_t answered = 0;
  while (!stopRequested() && (!args.sub.count || answered < *args.sub.count)) {
    const Status st = client->receive(m, std::chrono::milliseconds(200));
    if (st.code() == Errc::timeout) continue;
    if (!st.ok()) return report("reply " + args.sub.pattern, st);
    if (!m.isRequest()) continue;  // a plain publish: nothing to answer
    Result<uint64_t> id = [&]() -> Result<uint64_t> {
      if (args.text) return client->reply(m, *args.text);
      if (args.exec.empty()) return client->reply(m, m.payload);
      Result<std::string> output = runCommand(args.exec, m.payload);
      if (!output) {
        std::fprintf(stderr, "rdmamsg: reply %s: %s\n", args.sub.pattern.c_str(),
                     output.status().toString().c_str());
        return client->reply(m, std::string_view());  // the requester is answered, empty
      }
      return client->reply(m, *output);
    }();
    if (!id) return report("reply " + args.sub.pattern, id.status());
    ++answered;
    // Completions say whether the requester took it: a late reply is refused
    // (unknown_service), which is no reason to stop answering others.
    for (Completion c; client->pollCompletion(c);) {
      if (!c.status.ok())
        std::fprintf(stderr, "rdmamsg: reply %llu: %s\n", static_cast<unsigned long long>(c.msgId),
                     c.status.toString().c_str());
    }
  }
  (void)client->flush(std::chrono::seconds(5));
  return Exit::ok;
}

}  // namespace rdmamsg::cli
