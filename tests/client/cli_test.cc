// The rdmamsg CLI end to end: the real binary against an in-test server
// (LocalServer + loopback handler on a thread). Every child is reaped; every
// wait has a deadline.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "rdmamsg/client.h"
#include "test_server.h"
#include "tests/support/wait.h"

extern char** environ;

namespace rdmamsg {
namespace {

using namespace std::chrono_literals;

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// One run of the CLI with stdin from a file and stdout/stderr to files.
class CliRun {
 public:
  CliRun(const test::TempDir& dir, std::vector<std::string> args, const std::string& stdinFile = "")
      : out_(dir.file("out" + std::to_string(++counter_))),
        err_(dir.file("err" + std::to_string(counter_))) {
    args.insert(args.begin(), RDMAMSG_CLI);
    std::vector<char*> argv;
    for (auto& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, stdinFile.empty() ? "/dev/null" : stdinFile.c_str(),
                                     O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
  }
  ~CliRun() {
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  // The exit code, or -1 if it did not exit in time (then it is killed).
  int wait(std::chrono::milliseconds timeout = 30s) {
    return test::waitFor([&] { return !running(); }, timeout) ? code_ : -1;
  }
  bool running() {
    int status = 0;
    if (!exited_ && ::waitpid(pid_, &status, WNOHANG) == pid_) {
      exited_ = true;
      code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
    }
    return !exited_;
  }
  void signal(int signo) { ::kill(pid_, signo); }
  std::string out() const { return slurp(out_); }
  std::string err() const { return slurp(err_); }

 private:
  static inline int counter_ = 0;
  std::string out_, err_;
  pid_t pid_ = -1;
  bool exited_ = false;
  int code_ = -1;
};

class CliTest : public ::testing::Test {
 protected:
  std::vector<std::string> args(std::initializer_list<std::string> rest) {
    std::vector<std::string> a{"--socket", server_.socket()};
    a.insert(a.end(), rest);
    return a;
  }
  test::ThreadedServer server_;
  const test::TempDir& dir_ = server_.dir();
};

TEST_F(CliTest, StatusJson) {
  CliRun run(dir_, args({"status", "--json"}));
  ASSERT_EQ(run.wait(), 0) << run.err();
  auto j = nlohmann::json::parse(run.out());
  EXPECT_EQ(j["node"], "nodeA");
  ASSERT_TRUE(j["peers"].is_array());
  EXPECT_EQ(j["peers"][0]["name"], "nodeB");
  EXPECT_EQ(j["peers"][0]["state"], "established");
  EXPECT_TRUE(j["services"].is_array());
}

TEST_F(CliTest, StatusTable) {
  CliRun run(dir_, args({"status"}));
  ASSERT_EQ(run.wait(), 0) << run.err();
  const std::string out = run.out();
  EXPECT_NE(out.find("node: nodeA"), std::string::npos) << out;
  EXPECT_NE(out.find("established"), std::string::npos) << out;
}

TEST_F(CliTest, SocketFromEnvironment) {
  ::setenv("RDMAMSG_SOCKET", server_.socket().c_str(), 1);
  CliRun run(dir_, {"status", "--json"});
  const int rc = run.wait();
  ::unsetenv("RDMAMSG_SOCKET");
  EXPECT_EQ(rc, 0) << run.err();
}

TEST_F(CliTest, ListenCountPrintsPayloads) {
  CliRun listen(dir_, args({"listen", "inbox", "--count", "3"}));
  auto c = Client::connect(server_.socket());
  ASSERT_TRUE(c.ok());
  const std::span<const std::byte> first = std::as_bytes(std::span("one", 3));
  // The listener registers asynchronously: retry the first message until it is there.
  ASSERT_TRUE(test::waitFor([&] { return c->sendAndWait("nodeA", "inbox", first, 5s).ok(); }));
  ASSERT_TRUE(c->sendAndWait("nodeA", "inbox", std::as_bytes(std::span("two", 3)), 5s).ok());
  ASSERT_TRUE(c->sendAndWait("nodeA", "inbox", std::as_bytes(std::span("3", 1)), 5s).ok());
  ASSERT_EQ(listen.wait(), 0) << listen.err();
  EXPECT_EQ(listen.out(), "one\ntwo\n3\n");
}

TEST_F(CliTest, ListenExitsZeroOnSigterm) {
  CliRun listen(dir_, args({"listen", "inbox"}));
  auto c = Client::connect(server_.socket());
  ASSERT_TRUE(test::waitFor([&] {
    return c->sendAndWait("nodeA", "inbox", std::as_bytes(std::span("hi", 2)), 5s).ok();
  }));
  EXPECT_TRUE(listen.running());
  listen.signal(SIGTERM);
  EXPECT_EQ(listen.wait(), 0);
  EXPECT_EQ(listen.out(), "hi\n");
}

TEST_F(CliTest, SendStreamsStdinLines) {
  auto sink = Client::connect(server_.socket());
  ASSERT_TRUE(sink.ok());
  ASSERT_TRUE(sink->registerService("sink").ok());
  constexpr int kLines = 100000;
  const std::string input = dir_.file("lines.txt");
  {
    std::ofstream f(input);
    for (int i = 0; i < kLines; ++i)
      f << "line " << i << (i % 1000 == 0 ? "" : " x") << "\n";
    f << "\n";  // an empty line is an empty message
  }
  CliRun send(dir_, args({"send", "nodeA/sink", "--window", "256"}), input);
  Message m;
  for (int i = 0; i < kLines; ++i) {
    ASSERT_TRUE(sink->receive(m, 30s).ok()) << i;
    ASSERT_EQ(m.text(), "line " + std::to_string(i) + (i % 1000 == 0 ? "" : " x"));
  }
  ASSERT_TRUE(sink->receive(m, 30s).ok());
  EXPECT_EQ(m.text(), "");
  EXPECT_EQ(send.wait(), 0) << send.err();
}

TEST_F(CliTest, SendOneMessageArgument) {
  auto sink = Client::connect(server_.socket());
  ASSERT_TRUE(sink->registerService("sink").ok());
  CliRun send(dir_, args({"send", "nodeA/sink", "hello world"}));
  Message m;
  ASSERT_TRUE(sink->receive(m, 10s).ok());  // send exits once the listener took it
  EXPECT_EQ(m.text(), "hello world");
  EXPECT_EQ(send.wait(), 0) << send.err();
}

TEST_F(CliTest, SendErrorsExitNonZeroNamingTheFault) {
  CliRun unknownNode(dir_, args({"send", "nodeQ/sink", "x"}));
  EXPECT_EQ(unknownNode.wait(), 4);
  EXPECT_NE(unknownNode.err().find("nodeQ"), std::string::npos) << unknownNode.err();
  EXPECT_NE(unknownNode.err().find("unknown_node"), std::string::npos);

  CliRun unknownService(dir_, args({"send", "nodeA/nobody", "x"}));
  EXPECT_EQ(unknownService.wait(), 5);
  EXPECT_NE(unknownService.err().find("nobody"), std::string::npos) << unknownService.err();

  CliRun tooLarge(dir_, args({"send", "nodeA/nobody", std::string(70000, 'x')}));
  EXPECT_EQ(tooLarge.wait(), 7) << tooLarge.err();

  CliRun noSlash(dir_, args({"send", "nodeA", "x"}));
  EXPECT_EQ(noSlash.wait(), 2);

  CliRun badName(dir_, args({"send", "node A/svc", "x"}));
  EXPECT_EQ(badName.wait(), 8) << badName.err();
}

TEST_F(CliTest, NoDaemonAndUsageErrors) {
  CliRun noDaemon(dir_, {"--socket", dir_.file("missing.sock"), "status"});
  EXPECT_EQ(noDaemon.wait(), 3);
  EXPECT_NE(noDaemon.err().find("missing.sock"), std::string::npos) << noDaemon.err();
  CliRun usage(dir_, {"frobnicate"});
  EXPECT_EQ(usage.wait(), 2);
  CliRun help(dir_, {"--help"});
  EXPECT_EQ(help.wait(), 0);
  EXPECT_NE(help.out().find("Exit codes"), std::string::npos);
}

TEST_F(CliTest, DuplicateListenIsRejected) {
  auto holder = Client::connect(server_.socket());
  ASSERT_TRUE(holder->registerService("taken").ok());
  CliRun listen(dir_, args({"listen", "taken"}));
  EXPECT_EQ(listen.wait(), 8);
  EXPECT_NE(listen.err().find("taken"), std::string::npos) << listen.err();
}

}  // namespace
}  // namespace rdmamsg
