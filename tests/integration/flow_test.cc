// Integration: per-flow flow control between two daemons. A listener that
// stops reading stalls only its own flow: the link stays up (liveness does
// not depend on consumers), other services between the same daemons keep
// flowing, and the stalled flow's senders are backpressured, not failed,
// until the listener reads again.
#include <gtest/gtest.h>
#include <signal.h>

#include <sstream>

#include "harness.h"
#include "rdmamsg/client.h"
#include "tests/support/wait.h"

namespace rdmamsg::itest {
namespace {

// `count` lines of `width` bytes: "000000123xxxx…".
std::string numberedLines(int count, size_t width) {
  std::string out;
  out.reserve(static_cast<size_t>(count) * (width + 1));
  char num[16];
  for (int i = 1; i <= count; i++) {
    snprintf(num, sizeof num, "%09d", i);
    std::string line(num);
    line.resize(width, 'x');
    out += line;
    out += '\n';
  }
  return out;
}

size_t lineCount(const std::string& text) {
  return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
}

// `rdmamsg send NODE/SERVICE` reading `input` from a file, in the background.
bool startSender(Process& p, Cluster& c, const std::string& node, const std::string& dest,
                 const std::string& input, const std::string& tag) {
  Process::Options o;
  o.argv = {cliBinary(), "--socket", c.socket(node), "send", dest};
  o.stdinPath = c.dir().file(tag + ".in");
  writeFile(o.stdinPath, input);
  o.stdoutPath = c.dir().file(tag + ".out");
  o.stderrPath = c.dir().file(tag + ".err");
  return p.start(o);
}

uint64_t peerCounter(const std::string& socket, const std::string& peer, const char* key) {
  auto s = statusOf(socket);
  const Json* p = s ? peerEntry(*s, peer) : nullptr;
  return p != nullptr ? p->value(key, uint64_t{0}) : 0;
}

// Watches alpha and beta for `window`: both must see each other established
// all along, with no reconnection.
void expectLinkStaysUp(Cluster& c, std::chrono::milliseconds window) {
  auto until = std::chrono::steady_clock::now() + window;
  while (std::chrono::steady_clock::now() < until) {
    for (const auto& [self, other] : {std::pair{"alpha", "beta"}, std::pair{"beta", "alpha"}}) {
      auto s = statusOf(c.socket(self));
      ASSERT_TRUE(s) << self << " does not answer";
      ASSERT_EQ(peerState(*s, other), "established") << self << ": " << s->dump(2);
      ASSERT_EQ(peerEntry(*s, other)->value("connects", 0), 1) << self << " reconnected";
    }
  }
}

constexpr int kFlood = 20000;  // 20 MiB of 1 KiB lines: far more than buffers, windows, queues

// Two daemons; on beta a listener of `service` stopped (SIGSTOP); on alpha a
// sender streaming kFlood 1 KiB lines to it, already stalled at beta.
struct StuckFlow {
  Cluster c{{"alpha", "beta"}};
  Process listener, sender;
  std::string out;
  bool start(const std::string& service) {
    if (!c.start() || !c.waitFullMesh(10s)) return false;
    out = c.dir().file(service + ".out");
    if (!startListener(listener, c, "beta", service, kFlood, out)) return false;
    listener.signal(SIGSTOP);
    if (!startSender(sender, c, "alpha", "beta/" + service, numberedLines(kFlood, 1023), "flood"))
      return false;
    return test::waitFor(
        [&] { return peerCounter(c.socket("alpha"), "beta", "messages_sent") >= 1000; }, 10s);
  }
  std::string senderErrors() { return readFile(c.dir().file("flood.err")); }
  // Resumes the listener: the sender must finish with 0 and every line arrive in order.
  void resumeAndExpectEverything() {
    listener.signal(SIGCONT);
    auto code = sender.wait(60s);
    ASSERT_TRUE(code) << "the sender did not finish after the listener resumed";
    EXPECT_EQ(*code, 0) << senderErrors();
    auto lcode = listener.wait(30s);
    ASSERT_TRUE(lcode) << "the listener did not get every line";
    EXPECT_EQ(*lcode, 0);
    std::string got = readFile(out);
    EXPECT_EQ(lineCount(got), static_cast<size_t>(kFlood));
    EXPECT_EQ(got, numberedLines(kFlood, 1023)) << "lines lost, duplicated or reordered";
    expectNoRnr(c);  // backpressure held the data back, not a missing receive
  }
};

// The first case: a listener stopped (SIGSTOP) while a sender streams
// 1 KiB lines to it. Backpressure must not turn into a dead link or a failed
// send; when the listener resumes, everything arrives.
TEST(Flow, StuckListenerDoesNotTakeTheLinkDown) {
  StuckFlow s;
  ASSERT_TRUE(s.start("inbox"));
  // heartbeat_timeout is 1 s: three of them pass with the listener stopped.
  expectLinkStaysUp(s.c, 3s);
  EXPECT_TRUE(s.sender.running()) << "the sender ended while its listener was stopped: "
                                  << s.senderErrors();
  s.resumeAndExpectEverything();
  EXPECT_EQ(s.c["beta"].log().find("no traffic from peer"), std::string::npos);
}

// The second case: while one service's listener is stuck and a
// producer floods it, another service between the same two daemons keeps
// flowing, and the stuck flow completes without failure once it reads.
TEST(Flow, StuckListenerDoesNotBlockAnotherService) {
  StuckFlow s;
  ASSERT_TRUE(s.start("stuck"));
  // Another service, another producer on the same daemon: all 1000 arrive.
  Process live;
  std::string liveOut = s.c.dir().file("live.out");
  ASSERT_TRUE(startListener(live, s.c, "beta", "live", 1000, liveOut));
  CliResult r = runCli(s.c.dir(), {"--socket", s.c.socket("alpha"), "send", "beta/live"},
                       numberedLines(1000, 8), 20s);
  EXPECT_EQ(r.code, 0) << r.err;
  auto lcode = live.wait(10s);
  ASSERT_TRUE(lcode) << "live listener got " << lineCount(readFile(liveOut)) << " of 1000";
  EXPECT_EQ(readFile(liveOut), numberedLines(1000, 8));
  expectLinkStaysUp(s.c, 500ms);
  EXPECT_TRUE(s.sender.running()) << s.senderErrors();
  s.resumeAndExpectEverything();
}

}  // namespace
}  // namespace rdmamsg::itest
