// Unit tests of the rdma_cm event pump (daemon/rdma/cm_events.h) on
// softrdma and a real event loop: one wakeup of the edge-triggered channel
// gets every queued event (until EAGAIN), each is acked (an id can then be
// destroyed, which waits for its events' acks) and dispatched, with its
// private data copied, to the CmHandler in its id's context; an event for
// an id without a handler is counted and dropped.
#include "daemon/rdma/cm_events.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/daemon/rdma_fixture.h"

namespace rdmamsg::rdma {
namespace {

using namespace std::chrono_literals;

class CmEventPumpTest : public ::testing::Test {
 protected:
  // Starts address resolution of a new id with `handler` as its context:
  // softrdma queues ADDR_RESOLVED on the channel at once.
  CmIdPtr resolving(CmHandler* handler) {
    Result<CmIdPtr> created = createCmId(pump_.channel(), handler);
    EXPECT_TRUE(created.ok()) << created.status().toString();
    if (!created) return nullptr;
    CmIdPtr id = std::move(created).value();
    sockaddr_in dst = test::ipv4("127.0.0.1", 7471);
    EXPECT_EQ(rdma_resolve_addr(id.get(), nullptr, test::asSockaddr(dst), 2000), 0);
    return id;
  }

  loop::EventLoop loop_;
  CmEventPump pump_{loop_};
};

TEST_F(CmEventPumpTest, OneWakeupDispatchesEveryQueuedEventToItsIdsHandler) {
  test::RecordingHandler a, b;
  std::vector<CmIdPtr> ids;
  for (int i = 0; i < 3; i++)
    ids.push_back(resolving(&a));
  ids.push_back(resolving(&b));
  EXPECT_TRUE(a.events.empty()) << "nothing is dispatched outside the loop";
  // One wakeup: the fd is readable once (edge-triggered); every event queued
  // by then is read in it.
  loop_.runOnce(5000ms);
  ASSERT_EQ(a.events.size(), 3u);
  ASSERT_EQ(b.events.size(), 1u);
  for (size_t i = 0; i < 3; i++) {
    EXPECT_EQ(a.events[i].type, RDMA_CM_EVENT_ADDR_RESOLVED);
    EXPECT_EQ(a.events[i].id, ids[i].get()) << "in the order queued";
  }
  EXPECT_EQ(b.events[0].id, ids[3].get());
  EXPECT_EQ(pump_.eventsHandled(), 4u);
}

TEST_F(CmEventPumpTest, EveryEventIsAckedSoItsIdCanBeDestroyed) {
  test::RecordingHandler h;
  CmIdPtr id = resolving(&h);
  ASSERT_TRUE(test::stepUntil(
      loop_, [&] { return h.events.size() == 1; }, 5s));
  // rdma_destroy_id waits until every event reported for the id was acked:
  // it returns only if the pump acked. Destroyed on another thread, so that
  // a missing ack fails the test instead of hanging it.
  rdma_cm_id* raw = id.release();
  auto done = std::make_shared<std::promise<int>>();
  auto result = done->get_future();
  std::thread destroy([raw, done] { done->set_value(rdma_destroy_id(raw)); });
  const bool returned = result.wait_for(5s) == std::future_status::ready;
  EXPECT_TRUE(returned) << "rdma_destroy_id waits for an ack the pump did not give";
  if (returned) {
    EXPECT_EQ(result.get(), 0);
    destroy.join();
  } else {
    destroy.detach();
  }
}

TEST_F(CmEventPumpTest, AnEventWithoutAHandlerIsCountedAndTheRestStillDispatched) {
  test::RecordingHandler h;
  CmIdPtr orphan = resolving(nullptr);
  CmIdPtr handled = resolving(&h);
  loop_.runOnce(5000ms);
  EXPECT_EQ(pump_.eventsHandled(), 2u);
  ASSERT_EQ(h.events.size(), 1u);
  EXPECT_EQ(h.events[0].id, handled.get());
}

TEST_F(CmEventPumpTest, AConnectRequestGoesToTheListenersHandlerWithItsPrivateData) {
  test::RecordingHandler listener, client;
  const uint16_t port = test::freePort();
  ASSERT_NE(port, 0);
  CmIdPtr listen = createCmId(pump_.channel(), static_cast<CmHandler*>(&listener)).value();
  sockaddr_in a = test::ipv4("127.0.0.1", port);
  ASSERT_EQ(rdma_bind_addr(listen.get(), test::asSockaddr(a)), 0);
  ASSERT_EQ(rdma_listen(listen.get(), 4), 0);
  CmIdPtr dial = createCmId(pump_.channel(), static_cast<CmHandler*>(&client)).value();
  ASSERT_EQ(rdma_resolve_addr(dial.get(), nullptr, test::asSockaddr(a), 2000), 0);
  ASSERT_TRUE(test::stepUntil(loop_, [&] { return client.saw(RDMA_CM_EVENT_ADDR_RESOLVED); }));
  ASSERT_EQ(rdma_resolve_route(dial.get(), 2000), 0);
  ASSERT_TRUE(test::stepUntil(loop_, [&] { return client.saw(RDMA_CM_EVENT_ROUTE_RESOLVED); }));

  const std::string hello = "private data of the request";
  rdma_conn_param p{};
  p.private_data = hello.data();
  p.private_data_len = static_cast<uint8_t>(hello.size());
  CmIdPtr request;
  std::string seen;
  listener.then = [&](const CmEvent& e) {
    if (e.type != RDMA_CM_EVENT_CONNECT_REQUEST) return;
    request.reset(e.id);
    // The event was acked before this call: its private data is the pump's copy.
    seen.assign(reinterpret_cast<const char*>(e.param.private_data), hello.size());
    EXPECT_GE(e.privateData.size(), hello.size());
    EXPECT_EQ(e.listenId, listen.get());
    rdma_reject(e.id, nullptr, 0);
  };
  ASSERT_EQ(rdma_connect(dial.get(), &p), 0);
  ASSERT_TRUE(test::stepUntil(loop_, [&] { return client.saw(RDMA_CM_EVENT_REJECTED); }));
  EXPECT_EQ(seen, hello);
  EXPECT_TRUE(request) << "the new id's events went to its listener's handler";
}

}  // namespace
}  // namespace rdmamsg::rdma
