// Integration: the rdmamsg command-line tool end to end, across two daemons.
#include <gtest/gtest.h>

#include <signal.h>

#include <fstream>
#include <regex>

#include "harness.h"
#include "tests/support/wait.h"

namespace rdmamsg::itest {
namespace {

TEST(Cli, SendLinesFromStdinToAListenerOnAnotherNode) {
  Cluster c({"alpha", "beta"});
  ASSERT_TRUE(c.start());
  ASSERT_TRUE(c.waitFullMesh(10s));
  Process listener;
  std::string out = c.dir().file("listen.out");
  ASSERT_TRUE(startListener(listener, c, "beta", "echo", 3, out));

  CliResult r =
      runCli(c.dir(), {"--socket", c.socket("alpha"), "send", "beta/echo"}, "one\ntwo\nthree\n");
  EXPECT_EQ(r.code, 0) << r.err;
  auto code = listener.wait(10s);
  ASSERT_TRUE(code) << "listener did not exit after 3 messages";
  EXPECT_EQ(*code, 0) << readFile(out + ".err");
  EXPECT_EQ(readFile(out), "one\ntwo\nthree\n");
}

TEST(Cli, ManyLinesStreamThroughWithASmallWindow) {
  Cluster c({"alpha", "beta"});
  ASSERT_TRUE(c.start());
  ASSERT_TRUE(c.waitFullMesh(10s));
  Process listener;
  std::string out = c.dir().file("listen.out");
  ASSERT_TRUE(startListener(listener, c, "beta", "lines", 2000, out));
  std::string input;
  for (int i = 0; i < 2000; i++)
    input += "line " + std::to_string(i) + "\n";
  CliResult r = runCli(
      c.dir(), {"--socket", c.socket("alpha"), "send", "beta/lines", "--window", "7", "--progress"},
      input);
  EXPECT_EQ(r.code, 0) << r.err;
  auto code = listener.wait(10s);
  ASSERT_TRUE(code);
  EXPECT_EQ(*code, 0);
  EXPECT_EQ(readFile(out), input);
  // --progress ends with the final count (standard error is not a terminal:
  // one line per report).
  EXPECT_NE(r.err.find("sent 2000, confirmed 2000, in flight 0\n"), std::string::npos) << r.err;
}

// When its daemon goes away mid-stream, `rdmamsg send` says how far the
// stream is known to have got: every message up to the one it names was
// confirmed (and has reached the listener), so the user resumes there.
TEST(Cli, ADaemonLostMidStreamIsReportedWithWhereToResume) {
  Cluster c({"alpha", "beta"});
  ASSERT_TRUE(c.start());
  ASSERT_TRUE(c.waitFullMesh(10s));
  Process listener;
  std::string out = c.dir().file("listen.out");
  ASSERT_TRUE(startListener(listener, c, "beta", "inbox", 1000000, out));
  const int lines = 300000;
  {
    std::ofstream in(c.dir().file("lines.txt"));
    char line[96];
    for (int i = 1; i <= lines; i++) {
      std::snprintf(line, sizeof line, "line-%07d-%040d\n", i, 0);
      in << line;
    }
  }
  Process sender;
  Process::Options o;
  o.argv = {cliBinary(), "--socket", c.socket("alpha"), "send", "beta/inbox"};
  o.stdinPath = c.dir().file("lines.txt");
  o.stdoutPath = c.dir().file("send.out");
  o.stderrPath = c.dir().file("send.err");
  ASSERT_TRUE(sender.start(o));
  // The listener takes some, then nothing more: the stream stalls on its window.
  ASSERT_TRUE(rdmamsg::test::waitFor([&] { return readFile(out).size() >= 64 * 1024; }, 20s));
  listener.signal(SIGSTOP);
  // Beta holds deliveries the listener has not taken: the stream is stalled.
  ASSERT_TRUE(waitForStatus(
      c.socket("beta"),
      [](const Json& s) { return s.value("unconsumed", Json::object()).value("bytes", 0) > 0; },
      20s));
  // Alpha has had confirmations from beta (and so written their acks to the
  // sender, in the turn it had them) before it is killed.
  ASSERT_TRUE(waitForStatus(
      c.socket("alpha"),
      [](const Json& s) {
        const Json* p = peerEntry(s, "beta");
        return p != nullptr && p->value("confirmed", uint64_t{0}) > 0;
      },
      20s));
  ASSERT_TRUE(sender.running()) << "the stream finished before its daemon was stopped";
  c["alpha"].kill9();
  auto code = sender.wait(20s);
  ASSERT_TRUE(code) << "send did not exit after its daemon went away";
  EXPECT_EQ(*code, 3);  // no_daemon
  const std::string err = readFile(c.dir().file("send.err"));
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      err, m,
      std::regex("([0-9]+) of ([0-9]+) messages sent were confirmed; messages 1-([0-9]+) all "
                 "were; message ([0-9]+) has no known outcome")))
      << err;
  const long confirmed = std::stol(m[1]), sent = std::stol(m[2]), prefix = std::stol(m[3]);
  EXPECT_EQ(std::stol(m[4]), prefix + 1);
  EXPECT_GT(prefix, 0);
  EXPECT_GE(confirmed, prefix);
  EXPECT_LT(prefix, sent);
  EXPECT_LE(sent, lines);

  // Every message reported confirmed reaches the listener, in order.
  listener.signal(SIGCONT);
  char last[96];
  std::snprintf(last, sizeof last, "line-%07ld-", prefix);
  EXPECT_TRUE(
      rdmamsg::test::waitFor([&] { return readFile(out).find(last) != std::string::npos; }, 20s))
      << "the listener never got message " << prefix;
  listener.signal(SIGTERM);
  listener.wait(5s);
  const std::string got = readFile(out);
  size_t pos = 0;
  for (long i = 1; i <= prefix; i++) {
    char want[96];
    std::snprintf(want, sizeof want, "line-%07ld-%040d\n", i, 0);
    ASSERT_EQ(got.compare(pos, std::strlen(want), want), 0) << "message " << i << " missing";
    pos += std::strlen(want);
  }
}

TEST(Cli, SingleMessageArgumentAndErrors) {
  Cluster c({"alpha", "beta"});
  ASSERT_TRUE(c.start());
  ASSERT_TRUE(c.waitFullMesh(10s));
  Process listener;
  std::string out = c.dir().file("listen.out");
  ASSERT_TRUE(startListener(listener, c, "alpha", "svc", 1, out));
  CliResult r = runCli(c.dir(), {"--socket", c.socket("beta"), "send", "alpha/svc", "hello world"});
  EXPECT_EQ(r.code, 0) << r.err;
  ASSERT_TRUE(listener.wait(10s));
  EXPECT_EQ(readFile(out), "hello world\n");

  r = runCli(c.dir(), {"--socket", c.socket("beta"), "send", "gamma/x", "hi"});
  EXPECT_EQ(r.code, 4) << r.err;
  r = runCli(c.dir(), {"--socket", c.socket("beta"), "send", "alpha/nobody", "hi"});
  EXPECT_EQ(r.code, 5) << r.err;
  EXPECT_NE(r.err.find("0 of 1 messages sent were confirmed; message 1 failed (unknown_service)"),
            std::string::npos)
      << r.err;
  r = runCli(c.dir(), {"--socket", c.dir().file("nothing.sock"), "send", "alpha/svc", "hi"});
  EXPECT_EQ(r.code, 3) << r.err;
  r = runCli(c.dir(), {"--socket", c.socket("beta"), "send", "no-slash", "hi"});
  EXPECT_EQ(r.code, 2) << r.err;

  // A second listener for a taken service is refused (exit 8).
  Process first;
  ASSERT_TRUE(startListener(first, c, "beta", "taken", 1, c.dir().file("first.out")));
  r = runCli(c.dir(), {"--socket", c.socket("beta"), "listen", "taken", "--count", "1"});
  EXPECT_EQ(r.code, 8) << r.err;
  first.signal(SIGTERM);
  auto code = first.wait(5s);
  ASSERT_TRUE(code);
  EXPECT_EQ(*code, 0) << "listen must exit 0 on SIGTERM";
}

TEST(Cli, StatusShowsPeersAndServices) {
  Cluster c({"alpha", "beta"});
  ASSERT_TRUE(c.start());
  ASSERT_TRUE(c.waitFullMesh(10s));
  CliResult r = runCli(c.dir(), {"--socket", c.socket("alpha"), "status", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  Json j = Json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j.value("node", ""), "alpha");
  EXPECT_EQ(peerState(j, "beta"), "established");

  r = runCli(c.dir(), {"--socket", c.socket("alpha"), "status"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("alpha"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("beta"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("established"), std::string::npos) << r.out;

  c["alpha"].stop();
  r = runCli(c.dir(), {"--socket", c.socket("alpha"), "status"});
  EXPECT_EQ(r.code, 3) << r.out << r.err;
}

}  // namespace
}  // namespace rdmamsg::itest
