// Reports: what the local side learned this turn reaches the router in the
// report phase, after the sessions were served, in the order learned.
#include "daemon/local/reports.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "daemon/loop/event_loop.h"

namespace rdmamsg::local {
namespace {

using loop::EventLoop;
using loop::Phase;
using loop::PhaseTask;

Receipt localReceipt(uint64_t seq) {
  Receipt r;
  r.kind = Receipt::Kind::local;
  r.owner = 7;
  r.seq = seq;
  return r;
}

TEST(ReportsTest, ToldInTheReportPhaseAfterTheServiceInOrder) {
  EventLoop loop;
  Reports reports(loop);
  std::string trace;
  reports.onConsumed([&](SessionId listener, const Receipt& r, size_t bytes, Errc errc) {
    trace += "c" + std::to_string(listener) + ":" + std::to_string(r.seq) + ":" +
             std::to_string(bytes) + (errc == Errc::ok ? "ok " : "lost ");
  });
  reports.onDrained([&](SessionId id) { trace += "d" + std::to_string(id) + " "; });
  PhaseTask service(loop, Phase::service, [&] {
    trace += "service ";
    reports.consumed(1, localReceipt(10), 64, Errc::ok);
    reports.drained(2);
    reports.consumed(3, localReceipt(11), 128, Errc::unknown_service);
  });
  service.schedule();
  loop.runOnce();
  // Consumed first (the senders' confirmations), then the drained listeners.
  EXPECT_EQ(trace, "service c1:10:64ok c3:11:128lost d2 ");
  trace.clear();
  loop.runOnce();
  EXPECT_EQ(trace, "") << "told once";
}

TEST(ReportsTest, WhatACallbackQueuesIsToldInALaterReport) {
  EventLoop loop;
  Reports reports(loop);
  std::vector<uint64_t> told;
  reports.onConsumed([&](SessionId, const Receipt& r, size_t, Errc) {
    told.push_back(r.seq);
    if (r.seq < 3) reports.consumed(1, localReceipt(r.seq + 1), 1, Errc::ok);  // learned now
  });
  reports.consumed(1, localReceipt(1), 1, Errc::ok);
  for (int i = 0; i < 10 && told.size() < 3; i++)
    loop.runOnce(std::chrono::milliseconds(10));
  EXPECT_EQ(told, (std::vector<uint64_t>{1, 2, 3}));
}

TEST(ReportsTest, NothingIsToldWithoutCallbacks) {
  EventLoop loop;
  Reports reports(loop);
  reports.consumed(1, localReceipt(1), 1, Errc::ok);
  reports.drained(1);
  loop.runOnce();  // must not call an empty std::function
  int told = 0;
  reports.onDrained([&](SessionId) { told++; });
  loop.runOnce();
  EXPECT_EQ(told, 0) << "what was told without a listener is gone, not kept";
}

}  // namespace
}  // namespace rdmamsg::local
