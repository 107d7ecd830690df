// Integration: the rdmamsg command-line tool end to end, across two daemons.
#include <gtest/gtest.h>

#include "harness.h"

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
      c.dir(), {"--socket", c.socket("alpha"), "send", "beta/lines", "--window", "7"}, input);
  EXPECT_EQ(r.code, 0) << r.err;
  auto code = listener.wait(10s);
  ASSERT_TRUE(code);
  EXPECT_EQ(*code, 0);
  EXPECT_EQ(readFile(out), input);
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
