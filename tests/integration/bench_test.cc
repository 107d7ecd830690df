// Integration: `rdmamsg bench` across two daemons: every message arrives in
// order and is acknowledged, the JSON report carries the documented keys and
// the daemons' counter deltas, latency percentiles are ordered. No timing is
// asserted.
#include <gtest/gtest.h>

#include "harness.h"

namespace rdmamsg::itest {
namespace {

Json parseReport(const CliResult& r) {
  Json j = Json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.out;
  return j.is_discarded() ? Json::object() : j;
}

void expectDaemonReport(const Json& d, const std::string& node, const std::string& peer) {
  ASSERT_TRUE(d.is_object()) << d.dump();
  EXPECT_EQ(d.value("node", ""), node);
  for (const char* key : {"socket", "counters", "peers", "rdma", "per_message"}) {
    EXPECT_TRUE(d.contains(key)) << key << " missing in " << d.dump();
  }
  const Json& rdma = d["peers"][peer]["rdma"];
  for (const char* key : {"send_wrs", "post_send_calls", "send_wrs_signaled", "recv_wrs",
                          "post_recv_calls", "credit_stalls", "batches_received"}) {
    EXPECT_TRUE(rdma.contains(key)) << key << " missing in " << rdma.dump();
  }
  EXPECT_GT(d["rdma"].value("send_wrs", 0.0), 0.0) << d.dump();
  EXPECT_GT(d["per_message"].value("send_wrs", 0.0), 0.0) << d.dump();
  EXPECT_GT(d["per_message"].value("post_send_calls", 0.0), 0.0) << d.dump();
}

void expectOrdered(const Json& rtt) {
  for (const char* key : {"p50", "p99", "p99.9", "mean", "min", "max"}) {
    ASSERT_TRUE(rtt.contains(key)) << key << " missing in " << rtt.dump();
  }
  EXPECT_GT(rtt["p50"].get<double>(), 0.0);
  EXPECT_LE(rtt["min"].get<double>(), rtt["p50"].get<double>());
  EXPECT_LE(rtt["p50"].get<double>(), rtt["p99"].get<double>());
  EXPECT_LE(rtt["p99"].get<double>(), rtt["p99.9"].get<double>());
  EXPECT_LE(rtt["p99.9"].get<double>(), rtt["max"].get<double>());
}

TEST(Bench, ThroughputDeliversEveryMessageInOrderAndReportsCounterDeltas) {
  Cluster c({"alpha", "beta"});
  ASSERT_TRUE(c.start());
  ASSERT_TRUE(c.waitFullMesh(10s));
  CliResult r =
      runCli(c.dir(),
             {"--socket", c.socket("alpha"), "bench", "throughput", "beta/bench", "--sink-socket",
              c.socket("beta"), "--count", "2000", "--senders", "2", "--window", "300", "--json"},
             "", 20s);
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  Json j = parseReport(r);
  EXPECT_EQ(j.value("mode", ""), "throughput");
  const Json& p = j["parameters"];
  EXPECT_EQ(p.value("size", 0), 64);
  EXPECT_EQ(p.value("count", 0), 2000);
  EXPECT_EQ(p.value("senders", 0), 2);
  EXPECT_EQ(p.value("window", 0), 300);
  const Json& res = j["results"];
  EXPECT_EQ(res.value("sent", 0), 2000);
  EXPECT_EQ(res.value("acked", 0), 2000);
  EXPECT_EQ(res.value("delivered", 0), 2000);
  EXPECT_EQ(res.value("failed", -1), 0);
  EXPECT_EQ(res.value("order_errors", -1), 0);
  EXPECT_TRUE(res.value("ok", false));
  for (const char* key : {"elapsed_seconds", "msgs_per_second", "mb_per_second"}) {
    EXPECT_TRUE(res.contains(key)) << key;
  }
  expectDaemonReport(j["daemons"]["sender"], "alpha", "beta");
  expectDaemonReport(j["daemons"]["receiver"], "beta", "alpha");
  EXPECT_GE(j["daemons"]["sender"]["counters"].value("messages_routed", 0), 2000);
  // The clients' own system calls per message, by call.
  for (const char* side : {"senders", "sink"}) {
    const Json& calls = j["clients"][side];
    ASSERT_TRUE(calls.is_object()) << side << ": " << j["clients"].dump();
    EXPECT_GE(calls.value("syscalls", -1.0), 0.0) << side;
    EXPECT_GE(calls.value("syscalls", -1.0), calls.value("polls", -1.0)) << side;
  }
}

// Messages of 16 KiB and more are written where they are sent from
// (claims), from two senders at once: all arrive, in order; --copy-send
// sends them from the bench's buffer instead.
TEST(Bench, LargeMessagesAreClaimedOrCopiedAndArriveInOrder) {
  Cluster c({"alpha", "beta"});
  ASSERT_TRUE(c.start());
  ASSERT_TRUE(c.waitFullMesh(10s));
  for (const char* how : {"claim", "copy"}) {
    std::vector<std::string> args = {
        "--socket",      c.socket("alpha"), "bench",   "throughput", "beta/large",
        "--sink-socket", c.socket("beta"),  "--count", "300",        "--size",
        "100KiB",        "--senders",       "2",       "--window",   "8",
        "--json"};
    if (std::string_view(how) == "copy") args.push_back("--copy-send");
    CliResult r = runCli(c.dir(), args, "", 60s);
    ASSERT_EQ(r.code, 0) << how << ": " << r.err << r.out;
    Json j = parseReport(r);
    EXPECT_EQ(j["parameters"].value("send", ""), how);
    const Json& res = j["results"];
    EXPECT_EQ(res.value("delivered", 0), 300) << how;
    EXPECT_EQ(res.value("acked", 0), 300) << how;
    EXPECT_EQ(res.value("order_errors", -1), 0) << how;
    EXPECT_TRUE(res.value("ok", false)) << how;
  }
}

TEST(Bench, LatencyReportsOrderedPercentiles) {
  Cluster c({"alpha", "beta"});
  ASSERT_TRUE(c.start());
  ASSERT_TRUE(c.waitFullMesh(10s));
  CliResult r =
      runCli(c.dir(),
             {"--socket", c.socket("alpha"), "bench", "latency", "beta/echo", "--echo-socket",
              c.socket("beta"), "--count", "200", "--warmup", "20", "--size", "1KiB", "--json"},
             "", 20s);
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  Json j = parseReport(r);
  EXPECT_EQ(j.value("mode", ""), "latency");
  EXPECT_EQ(j["parameters"].value("size", 0), 1024);
  EXPECT_EQ(j["parameters"].value("count", 0), 200);
  const Json& res = j["results"];
  EXPECT_EQ(res.value("round_trips", 0), 200);
  EXPECT_EQ(res.value("sent", 0), 220);
  EXPECT_EQ(res.value("acked", 0), 220);
  EXPECT_EQ(res.value("failed", -1), 0);
  EXPECT_TRUE(res.value("ok", false));
  expectOrdered(res["rtt_us"]);
  expectDaemonReport(j["daemons"]["sender"], "alpha", "beta");
  expectDaemonReport(j["daemons"]["receiver"], "beta", "alpha");
  // Each round trip sleeps and wakes both sides (the default idle strategy):
  // the requester's and the echo's library make system calls every time.
  EXPECT_GT(j["clients"]["requester"].value("syscalls", 0.0), 0.0) << j["clients"].dump();
  EXPECT_GT(j["clients"]["echo"].value("syscalls", 0.0), 0.0) << j["clients"].dump();
}

// The multi-host halves: `bench sink` and `bench echo` run on their own
// (here on beta's socket) and the measuring side finds them by name.
TEST(Bench, RemoteSinkAndEchoServeTheMeasuringSide) {
  Cluster c({"alpha", "beta"});
  ASSERT_TRUE(c.start());
  ASSERT_TRUE(c.waitFullMesh(10s));
  Process sink, echo;
  const std::string sinkOut = c.dir().file("sink.out"), echoOut = c.dir().file("echo.out");
  Process::Options o;
  o.argv = {cliBinary(), "--socket", c.socket("beta"), "bench", "sink",
            "flood",     "--count",  "1000",           "--json"};
  o.stdoutPath = sinkOut;
  ASSERT_TRUE(sink.start(o));
  o.argv = {cliBinary(), "--socket", c.socket("beta"), "bench", "echo", "pong", "--count", "60"};
  o.stdoutPath = echoOut;
  ASSERT_TRUE(echo.start(o));
  ASSERT_TRUE(waitForStatus(c.socket("beta"), [](const Json& s) {
    return hasService(s, "flood") && hasService(s, "pong");
  }));

  CliResult r = runCli(c.dir(),
                       {"--socket", c.socket("alpha"), "bench", "throughput", "beta/flood",
                        "--count", "1000", "--senders", "3", "--json"},
                       "", 20s);
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  Json j = parseReport(r);
  EXPECT_EQ(j["results"].value("acked", 0), 1000);
  EXPECT_TRUE(j["results"]["delivered"].is_null());
  auto code = sink.wait(10s);
  ASSERT_TRUE(code) << "sink did not exit after 1000 messages";
  EXPECT_EQ(*code, 0) << readFile(sinkOut);
  Json s = Json::parse(readFile(sinkOut), nullptr, false);
  ASSERT_FALSE(s.is_discarded()) << readFile(sinkOut);
  EXPECT_EQ(s.value("total_received", 0), 1000);
  EXPECT_EQ(s.value("order_errors", -1), 0);
  EXPECT_EQ(s.value("streams", 0), 3);

  r = runCli(c.dir(),
             {"--socket", c.socket("alpha"), "bench", "latency", "beta/pong", "--count", "50",
              "--warmup", "10"},
             "", 20s);
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("p99.9"), std::string::npos) << r.out;
  code = echo.wait(10s);
  ASSERT_TRUE(code) << "echo did not exit after 60 messages";
  EXPECT_EQ(*code, 0) << readFile(echoOut);
}

TEST(Bench, ThroughputWithoutAListenerFailsWithUnknownService) {
  Cluster c({"alpha", "beta"});
  ASSERT_TRUE(c.start());
  ASSERT_TRUE(c.waitFullMesh(10s));
  CliResult r = runCli(
      c.dir(),
      {"--socket", c.socket("alpha"), "bench", "throughput", "beta/nobody", "--count", "100"}, "",
      20s);
  EXPECT_EQ(r.code, 5) << r.err << r.out;
  r = runCli(c.dir(), {"--socket", c.socket("alpha"), "bench", "throughput", "beta/x", "--size",
                       "8", "--count", "1"});
  EXPECT_EQ(r.code, 2) << r.err;
}

}  // namespace
}  // namespace rdmamsg::itest
