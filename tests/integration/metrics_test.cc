// Integration: the daemon's metrics, as Prometheus reads them. A daemon with
// metrics_listen serves GET /metrics; `rdmamsg metrics` prints the same
// exposition. Both are parsed with prometheus_client's strict OpenMetrics
// parser (tests/integration/parse_metrics.py, Debian's python3).
#include <gtest/gtest.h>

#include <cstdlib>

#include "harness.h"
#include "rdmamsg/client.h"

namespace rdmamsg::itest {
namespace {

// The parser's view of an exposition: from `source` (a URL, or "-" for the
// file `input`); nullopt (with the parser's complaint) when invalid.
std::optional<Json> parse(const TempDir& dir, const std::string& source,
                          const std::string& input = "/dev/null") {
  Process p;
  Process::Options o;
  o.argv = {"/usr/bin/python3", RDMAMSG_ITEST_SOURCE_DIR "/parse_metrics.py", source};
  o.stdinPath = input;
  o.stdoutPath = dir.file("parsed.json");
  o.stderrPath = dir.file("parsed.err");
  if (!p.start(o) || p.wait(30s) != 0) {
    ADD_FAILURE() << "the OpenMetrics parser refused it: " << readFile(dir.file("parsed.err"));
    return std::nullopt;
  }
  Json j = Json::parse(readFile(dir.file("parsed.json")), nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

// The value of the sample `name` whose labels include `labels`; -1 if none.
double sample(const Json& parsed, const std::string& name, const Json& labels = Json::object()) {
  for (const auto& s : parsed["samples"]) {
    if (s["name"] != name) continue;
    bool match = true;
    for (const auto& [k, v] : labels.items())
      match = match && s["labels"].contains(k) && s["labels"][k] == v;
    if (match) return s["value"].get<double>();
  }
  return -1;
}

TEST(Metrics, PrometheusReadsTheDaemonsCountersOverHttpAndFromTheCli) {
  const uint16_t port = pickPort({"127.0.0.1"});
  ASSERT_NE(port, 0);
  MeshOptions o;
  o.nodeExtra["alpha"] = "metrics_listen: 127.0.0.1:" + std::to_string(port) + "\n";
  Cluster c({"alpha", "beta"}, o);
  ASSERT_TRUE(c.start());
  ASSERT_TRUE(c.waitFullMesh());
  ASSERT_TRUE(c["alpha"].waitLog("serving metrics on http://127.0.0.1:" + std::to_string(port)));

  // Traffic, so that counters and the latency histogram have something.
  Process listener;
  ASSERT_TRUE(startListener(listener, c, "beta", "inbox", 200, c.dir().file("inbox.out")));
  std::string lines;
  double payloadBytes = 0;  // each line without its newline is a message
  for (int i = 0; i < 200; ++i) {
    const std::string text = "message " + std::to_string(i);
    lines += text + "\n";
    payloadBytes += static_cast<double>(text.size());
  }
  auto sent = runCli(c.dir(), {"--socket", c.socket("alpha"), "send", "beta/inbox"}, lines);
  ASSERT_EQ(sent.code, 0) << sent.err;
  EXPECT_EQ(listener.wait(10s), 0);

  const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/metrics";
  auto http = parse(c.dir(), url);
  ASSERT_TRUE(http);
  const Json& m = *http;
  EXPECT_EQ(m["content_type"], "application/openmetrics-text; version=1.0.0; charset=utf-8");
  EXPECT_EQ(m["families"]["rdmamsg_peer_delivery_seconds"], "histogram");
  EXPECT_EQ(m["families"]["rdmamsg_peer_messages_sent"], "counter");
  EXPECT_EQ(sample(m, "rdmamsg_build_info", {{"node", "alpha"}}), 1);
  EXPECT_EQ(sample(m, "rdmamsg_peer_up", {{"peer", "beta"}}), 1);
  EXPECT_EQ(sample(m, "rdmamsg_peer_messages_sent_total", {{"peer", "beta"}}), 200);
  EXPECT_EQ(sample(m, "rdmamsg_peer_messages_confirmed_total", {{"peer", "beta"}}), 200);
  EXPECT_GT(sample(m, "rdmamsg_peer_delivery_seconds_count", {{"peer", "beta"}}), 0);
  EXPECT_EQ(sample(m, "rdmamsg_peer_delivery_seconds_bucket", {{"peer", "beta"}, {"le", "+Inf"}}),
            sample(m, "rdmamsg_peer_delivery_seconds_count", {{"peer", "beta"}}));
  EXPECT_GE(sample(m, "rdmamsg_messages_routed_total"), 200);
  EXPECT_GE(sample(m, "rdmamsg_log_lines_dropped_total"), 0);
  EXPECT_EQ(sample(m, "rdmamsg_config_generation"), 1);
  EXPECT_GT(sample(m, "rdmamsg_loop_syscalls_total", {{"call", "socket_reads"}}), 0);
  EXPECT_GE(sample(m, "rdmamsg_device_registered_bytes", {{"device", "softrdma0"}}), 1);
  // Every payload byte was copied once into alpha's send buffers; the
  // client's frames (names and headers too) came in through its input.
  EXPECT_EQ(sample(m, "rdmamsg_bytes_copied_total", {{"stage", "send_buffer"}}), payloadBytes);
  EXPECT_GT(sample(m, "rdmamsg_bytes_copied_total", {{"stage", "client_in"}}), payloadBytes);

  // The CLI prints the same families (those with samples: beta sends
  // nothing, so it has no flows), for a daemon without a listener too.
  auto cli = runCli(c.dir(), {"--socket", c.socket("beta"), "metrics"});
  ASSERT_EQ(cli.code, 0) << cli.err;
  writeFile(c.dir().file("beta.metrics"), cli.out);
  auto fromCli = parse(c.dir(), "-", c.dir().file("beta.metrics"));
  ASSERT_TRUE(fromCli);
  for (const auto& [name, type] : (*fromCli)["families"].items())
    EXPECT_EQ(m["families"].value(name, ""), type) << name;
  EXPECT_EQ(sample(*fromCli, "rdmamsg_build_info", {{"node", "beta"}}), 1);
  EXPECT_EQ(sample(*fromCli, "rdmamsg_remote_deliveries_total"), 200);
  // Beta copied each payload once into the listener's output, and wrote it
  // out with its frames; nothing was fragmented, so nothing reassembled.
  EXPECT_EQ(sample(*fromCli, "rdmamsg_bytes_copied_total", {{"stage", "deliver"}}), payloadBytes);
  EXPECT_GT(sample(*fromCli, "rdmamsg_bytes_copied_total", {{"stage", "client_out"}}),
            payloadBytes);
  EXPECT_EQ(sample(*fromCli, "rdmamsg_bytes_copied_total", {{"stage", "reassembly"}}), 0);

  // Anything but /metrics is answered 404, and the daemon keeps serving.
  Process p;
  Process::Options get;
  get.argv = {"/usr/bin/python3", "-c",
              "import sys, urllib.request, urllib.error\n"
              "try:\n  urllib.request.urlopen(sys.argv[1], timeout=10)\n"
              "except urllib.error.HTTPError as e:\n  sys.exit(0 if e.code == 404 else 1)\n"
              "sys.exit(1)\n",
              "http://127.0.0.1:" + std::to_string(port) + "/other"};
  ASSERT_TRUE(p.start(get));
  EXPECT_EQ(p.wait(30s), 0) << "a path other than /metrics was not answered 404";
  EXPECT_TRUE(statusOf(c.socket("alpha")));
}

// A listener on shared memory (the default) gets each delivery written
// once, straight into its ring: the receiving daemon's output buffer and
// its copy to the client stay out of the way (docs/architecture.md).
TEST(Metrics, DeliveriesToASharedMemoryClientAreCopiedOnce) {
  Cluster c({"alpha", "beta"});
  ASSERT_TRUE(c.start());
  ASSERT_TRUE(c.waitFullMesh());
  constexpr int kCount = 100;
  const std::string text(10000, 'x');
  std::string lines;
  for (int i = 0; i < kCount; ++i)
    lines += text + "\n";
  Process listener;
  ASSERT_TRUE(startListener(listener, c, "beta", "inbox", kCount, c.dir().file("inbox.out")));
  auto before = statusOf(c.socket("beta"));
  ASSERT_TRUE(before);
  auto sent = runCli(c.dir(), {"--socket", c.socket("alpha"), "send", "beta/inbox"}, lines);
  ASSERT_EQ(sent.code, 0) << sent.err;
  EXPECT_EQ(listener.wait(10s), 0);
  auto after = statusOf(c.socket("beta"));
  ASSERT_TRUE(after);
  auto grew = [&](const char* key) {
    return (*after)["copies"][key].get<double>() - (*before)["copies"][key].get<double>();
  };
  const double payload = double(kCount) * double(text.size());
  EXPECT_EQ(grew("deliver_bytes"), payload);
  // What went through the output buffer meanwhile: the first status reply
  // and control frames, far less than one more copy of the payload.
  EXPECT_LT(grew("client_out_bytes"), payload / 4);
}

// Sends `count` lines of `lineBytes` (64 KiB) with the CLI (a shared-memory client; with
// `payloadArea` false, RDMAMSG_SHM_PAYLOAD_AREA=0) from alpha to a
// listener on beta, all of them whole and in order; returns by how much
// each of `node`'s copy counters grew, and the payload bytes sent.
struct Grown {
  Json before, after;
  double payload = 0;
  // The first status's answer, which the client output counts too.
  double statusBytes = 0;
  double operator()(const char* key) const {
    return after["copies"][key].get<double>() - before["copies"][key].get<double>();
  }
};

// RDMAMSG_SHM_PAYLOAD_AREA=0 for the CLIs started while it lives (they
// inherit it); taken back however the test ends.
struct AreaOff {
  explicit AreaOff(bool on) {
    if (on) ::setenv("RDMAMSG_SHM_PAYLOAD_AREA", "0", 1);
  }
  ~AreaOff() { ::unsetenv("RDMAMSG_SHM_PAYLOAD_AREA"); }
  AreaOff(const AreaOff&) = delete;
  AreaOff& operator=(const AreaOff&) = delete;
};

Grown sendLargeLines(Cluster& c, int count, bool payloadArea, const std::string& service,
                     const std::string& node = "alpha", size_t lineBytes = 64 * 1024) {
  AreaOff off(!payloadArea);
  Grown g;
  std::string lines;
  for (int i = 0; i < count; ++i)
    lines += std::string(lineBytes, static_cast<char>('a' + i)) + "\n";
  g.payload = double(count) * double(lineBytes);
  Process listener;
  const std::string file = c.dir().file(service + ".out");
  EXPECT_TRUE(startListener(listener, c, "beta", service, count, file));
  g.before = statusOf(c.socket(node)).value_or(Json::object());
  g.statusBytes = double(g.before.dump().size());
  auto sent = runCli(c.dir(), {"--socket", c.socket("alpha"), "send", "beta/" + service}, lines);
  EXPECT_EQ(sent.code, 0) << sent.err;
  EXPECT_EQ(listener.wait(10s), 0);
  EXPECT_EQ(readFile(file), lines) << "every message whole, in order";
  g.after = statusOf(c.socket(node)).value_or(Json::object());
  return g;
}

// Large messages from a shared-memory client without a payload area go as
// frame records and leave the sending daemon without a copy: their
// payloads are posted from the client's ring. Six of 64 KiB wait, at most,
// in half of the default 1 MiB ring, so none is copied into a queue either.
TEST(Metrics, LargeMessagesLeaveTheSendingDaemonWithoutACopy) {
  Cluster c({"alpha", "beta"});
  ASSERT_TRUE(c.start());
  ASSERT_TRUE(c.waitFullMesh());
  const Grown grew = sendLargeLines(c, 6, false, "inbox");
  ASSERT_TRUE(grew.before.contains("copies") && grew.after.contains("copies"));
  EXPECT_EQ(grew("sent_in_place_bytes"), grew.payload);
  EXPECT_EQ(grew("send_buffer_bytes"), 0);
  EXPECT_EQ(grew("flow_queue_bytes"), 0);
  // Only the frames' heads (ids, names) and the status exchange are read
  // out of the client's ring.
  EXPECT_LT(grew("client_in_bytes"), grew.payload / 100);
}

// Large deliveries to a shared-memory listener are written once, into
// blocks of its delivery area, which the listener's library reads in place:
// the receiving daemon's output buffer stays out of the way, and a message
// that comes in fragments is put together in its block, not in a
// reassembly buffer first.
TEST(Metrics, LargeDeliveriesAreWrittenIntoTheListenersDeliveryArea) {
  Cluster c({"alpha", "beta"});
  ASSERT_TRUE(c.start());
  ASSERT_TRUE(c.waitFullMesh());
  // Of one fragment (64 KiB), and of three (600 KiB: buffers of 256 KiB).
  for (size_t line : {size_t{64} << 10, size_t{600} << 10}) {
    const Grown grew = sendLargeLines(c, 6, true, "in" + std::to_string(line), "beta", line);
    ASSERT_TRUE(grew.before.contains("copies") && grew.after.contains("copies"));
    EXPECT_EQ(grew("deliver_bytes"), grew.payload) << line;
    EXPECT_EQ(grew("delivered_in_area_bytes"), grew.payload) << line;
    EXPECT_EQ(grew("reassembly_bytes"), 0) << line;
    EXPECT_LT(grew("client_out_bytes") - grew.statusBytes, grew.payload / 100) << line;
  }
}

// `count` lines of 64 KiB sent by a CLI on alpha to a listener on beta that
// takes none of them until alpha holds some in the flow's queue: with a
// window smaller than the burst, they wait for their window however fast
// the machine confirms. Alpha's copies before and after.
Grown sendLargeLinesToAHeldListener(Cluster& c, int count, bool payloadArea,
                                    const std::string& service) {
  constexpr size_t kLineBytes = 64 * 1024;
  AreaOff off(!payloadArea);
  Grown g;
  std::string lines;
  for (int i = 0; i < count; ++i)
    lines += std::string(kLineBytes, static_cast<char>('a' + i)) + "\n";
  g.payload = double(count) * double(kLineBytes);
  auto listener = Client::connect(c.socket("beta"));
  if (!listener || !listener->registerService(service).ok()) {
    ADD_FAILURE() << "no listener for " << service;
    return g;
  }
  g.before = statusOf(c.socket("alpha")).value_or(Json::object());
  Process sender;
  Process::Options o;
  o.argv = {cliBinary(), "--socket", c.socket("alpha"), "send", "beta/" + service};
  o.stdinPath = c.dir().file(service + ".in");
  writeFile(o.stdinPath, lines);
  o.stdoutPath = c.dir().file(service + ".sent");
  EXPECT_TRUE(sender.start(o));
  EXPECT_TRUE(waitForStatus(
      c.socket("alpha"),
      [&](const Json& s) {
        const Json* p = peerEntry(s, "beta");
        if (p == nullptr) return false;
        for (const Json& f : (*p)["flows"])
          if (f.value("service", "") == service && f.value("queued_messages", 0) > 0) return true;
        return false;
      },
      10s))
      << "nothing waited for the window";
  for (int i = 0; i < count; ++i) {
    Message msg;
    if (!listener->receive(msg, 10s).ok()) {
      ADD_FAILURE() << "message " << i << " did not arrive";
      break;
    }
    EXPECT_EQ(msg.text(), std::string(kLineBytes, static_cast<char>('a' + i))) << "message " << i;
  }
  EXPECT_EQ(sender.wait(10s), 0) << readFile(o.stdoutPath);
  g.after = statusOf(c.socket("alpha")).value_or(Json::object());
  return g;
}

// Messages that wait for their flow window wait in the client's payload
// area, where they lie: with a window of two messages, a burst of twelve is
// sent without one copy on the sending daemon. Without the area (frame
// records in the ring) those that wait for the window are copied.
TEST(Metrics, LargeMessagesWaitingForTheirWindowAreNotCopiedEither) {
  MeshOptions o;
  o.extra = "flow_window: 160KiB\n";
  Cluster c({"alpha", "beta"}, o);
  ASSERT_TRUE(c.start());
  ASSERT_TRUE(c.waitFullMesh());
  const Grown grew = sendLargeLinesToAHeldListener(c, 12, true, "area");
  ASSERT_TRUE(grew.before.contains("copies") && grew.after.contains("copies"));
  EXPECT_EQ(grew("sent_in_place_bytes"), grew.payload);
  EXPECT_EQ(grew("flow_queue_bytes"), 0) << "no message was copied to wait for its window";
  EXPECT_EQ(grew("send_buffer_bytes"), 0);
  const Grown ring = sendLargeLinesToAHeldListener(c, 12, false, "ring");
  EXPECT_GT(ring("flow_queue_bytes"), 0) << "frame records waiting for the window are copied";
}

}  // namespace
}  // namespace rdmamsg::itest
