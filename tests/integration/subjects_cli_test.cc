// Integration: subjects from the command line across two daemons — `rdmamsg
// sub` and `pub` (a publish reaches subscribers on both hosts; nothing
// matching exits 10), `request` and `reply` (echo, --exec; no_responders
// exits 10 at once, a reply that does not come exits 6).
#include <gtest/gtest.h>

#include <signal.h>

#include "harness.h"
#include "tests/support/wait.h"

namespace rdmamsg::itest {
namespace {

// Starts `rdmamsg sub` (or `reply`) on `node` with `args`, its output in `out`.
bool startCli(Process& p, const Cluster& c, const std::string& node,
              const std::vector<std::string>& args, const std::string& out) {
  Process::Options o;
  o.argv = {cliBinary(), "--socket", c.socket(node)};
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  o.stdoutPath = out;
  o.stderrPath = out + ".err";
  return p.start(o);
}

int subscriptions(const Json& s) {
  return s.contains("subjects") ? s["subjects"].value("subscriptions", 0) : 0;
}

// `node`'s daemon knows `peer`'s subscriptions (the interest it announced).
bool knowsInterestOf(const Cluster& c, const std::string& node, const std::string& peer) {
  return waitForStatus(
      c.socket(node),
      [&](const Json& s) {
        if (!s.contains("subjects")) return false;
        for (const Json& i : s["subjects"]["interest"])
          if (i.value("peer", "") == peer && i.value("patterns", 0) > 0) return true;
        return false;
      },
      10s);
}

TEST(SubjectsCli, APublishReachesSubscribersOnBothHostsAndSaysWhenNothingMatches) {
  Cluster c({"alpha", "beta"});
  ASSERT_TRUE(c.start());
  ASSERT_TRUE(c.waitFullMesh(10s));
  Process remote, local;
  const std::string remoteOut = c.dir().file("remote.out"), localOut = c.dir().file("local.out");
  ASSERT_TRUE(startCli(remote, c, "beta", {"sub", "prices.>", "--count", "3", "--with-subject"},
                       remoteOut));
  ASSERT_TRUE(startCli(local, c, "alpha", {"sub", "prices.*.x", "--count", "3"}, localOut));
  ASSERT_TRUE(waitForStatus(
      c.socket("alpha"), [](const Json& s) { return subscriptions(s) == 1; }, 10s));
  ASSERT_TRUE(knowsInterestOf(c, "alpha", "beta"));

  CliResult r = runCli(c.dir(), {"--socket", c.socket("alpha"), "pub", "prices.eu.x", "--counts"},
                       "one\ntwo\nthree\n");
  EXPECT_EQ(r.code, 0) << r.err;
  // Each publish: two subscriptions matched, both took it.
  EXPECT_EQ(r.out,
            "1 ok matched=2 taken=2 dropped=0\n2 ok matched=2 taken=2 dropped=0\n"
            "3 ok matched=2 taken=2 dropped=0\n");
  EXPECT_EQ(remote.wait(10s), 0) << readFile(remoteOut + ".err");
  EXPECT_EQ(local.wait(10s), 0) << readFile(localOut + ".err");
  EXPECT_EQ(readFile(remoteOut), "prices.eu.x one\nprices.eu.x two\nprices.eu.x three\n");
  EXPECT_EQ(readFile(localOut), "one\ntwo\nthree\n");

  ASSERT_TRUE(waitForStatus(
      c.socket("alpha"),
      [](const Json& s) {
        if (subscriptions(s) != 0) return false;
        for (const Json& i : s["subjects"]["interest"])
          if (i.value("patterns", 0) != 0) return false;
        return true;
      },
      10s))
      << "the subscriptions went with their clients";
  CliResult nobody = runCli(c.dir(), {"--socket", c.socket("alpha"), "pub", "prices.eu.x", "?"});
  EXPECT_EQ(nobody.code, 10) << "the subscribers are gone: " << nobody.err;
  EXPECT_NE(nobody.err.find("no_subscribers"), std::string::npos) << nobody.err;
  CliResult bad = runCli(c.dir(), {"--socket", c.socket("alpha"), "pub", "prices.*", "x"});
  EXPECT_EQ(bad.code, 8) << "a wildcard is not a subject: " << bad.err;
}

TEST(SubjectsCli, ARequestGetsItsReplyFromAnotherHostOrSaysWhyNot) {
  Cluster c({"alpha", "beta"});
  ASSERT_TRUE(c.start());
  ASSERT_TRUE(c.waitFullMesh(10s));
  CliResult none = runCli(c.dir(), {"--socket", c.socket("alpha"), "request", "svc.upper", "x"});
  EXPECT_EQ(none.code, 10) << none.err;
  EXPECT_NE(none.err.find("no_responders"), std::string::npos) << none.err;

  Process echo, upper;
  const std::string echoOut = c.dir().file("echo.out"), upperOut = c.dir().file("upper.out");
  ASSERT_TRUE(startCli(echo, c, "beta", {"reply", "svc.echo", "--count", "1"}, echoOut));
  ASSERT_TRUE(startCli(upper, c, "beta",
                       {"reply", "svc.upper", "--count", "1", "--exec", "tr a-z A-Z"}, upperOut));
  ASSERT_TRUE(waitForStatus(
      c.socket("beta"), [](const Json& s) { return subscriptions(s) == 2; }, 10s));
  ASSERT_TRUE(waitForStatus(
      c.socket("alpha"),
      [](const Json& s) {
        for (const Json& i : s["subjects"]["interest"])
          if (i.value("peer", "") == "beta" && i.value("patterns", 0) == 2) return true;
        return false;
      },
      10s));

  CliResult r = runCli(c.dir(), {"--socket", c.socket("alpha"), "request", "svc.echo", "hello"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "hello\n");
  CliResult u = runCli(c.dir(), {"--socket", c.socket("alpha"), "request", "svc.upper", "shout"});
  EXPECT_EQ(u.code, 0) << u.err;
  EXPECT_EQ(u.out, "SHOUT\n");
  EXPECT_EQ(echo.wait(10s), 0) << readFile(echoOut + ".err");
  EXPECT_EQ(upper.wait(10s), 0) << readFile(upperOut + ".err");

  // A subscriber that never answers: the request times out (exit 6).
  Process silent;
  const std::string silentOut = c.dir().file("silent.out");
  ASSERT_TRUE(startCli(silent, c, "beta", {"sub", "svc.slow"}, silentOut));
  ASSERT_TRUE(waitForStatus(
      c.socket("beta"), [](const Json& s) { return subscriptions(s) == 1; }, 10s));
  ASSERT_TRUE(knowsInterestOf(c, "alpha", "beta"));
  CliResult late = runCli(
      c.dir(), {"--socket", c.socket("alpha"), "request", "svc.slow", "?", "--timeout", "0.3"});
  EXPECT_EQ(late.code, 6) << late.err;
  EXPECT_NE(late.err.find("timeout"), std::string::npos) << late.err;
  EXPECT_TRUE(test::waitFor([&] { return readFile(silentOut) == "?\n"; }))
      << "the subscriber got the request: " << readFile(silentOut);
  silent.signal(SIGTERM);
  EXPECT_EQ(silent.wait(10s), 0);
}

}  // namespace
}  // namespace rdmamsg::itest
