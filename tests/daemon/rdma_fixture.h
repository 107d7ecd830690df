// Test support for the daemon's RDMA resources (daemon/rdma): softrdma's
// device (the test programs link libsoftrdma, which provides the rdma-core
// API), a real event loop with a CmEventPump, and a loopback connection of
// two RC queue pairs on 127.0.0.1 driven by the pump's CM events. Tests step
// the loop until a condition holds, with a deadline.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "daemon/loop/event_loop.h"
#include "daemon/peer/protocol.h"
#include "daemon/rdma/cm_events.h"
#include "daemon/rdma/device.h"
#include "daemon/rdma/verbs.h"
#include "tests/daemon/mesh_fixture.h"

namespace rdmamsg::rdma::test {

using namespace std::chrono_literals;
using peer::test::freePort;
using peer::test::stepUntil;

// The buffer size of the pools these tests make, and what a pool of
// `count` of them registers.
inline constexpr size_t kBuffer = 4096;
inline uint64_t bytesFor(uint32_t count) {
  return BufferPool::registeredBytesFor(kBuffer, count);
}

inline sockaddr_in ipv4(const char* ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, ip, &a.sin_addr);
  return a;
}

inline sockaddr* asSockaddr(sockaddr_in& a) {
  return reinterpret_cast<sockaddr*>(&a);
}

// softrdma's device, opened through libibverbs, and a protection domain on it.
struct OpenDevice {
  OpenDevice() {
    int n = 0;
    DeviceListPtr list(ibv_get_device_list(&n));
    if (list && n > 0) context.reset(ibv_open_device(list[0]));
    if (context) pd.reset(ibv_alloc_pd(context.get()));
    if (context) ibv_query_device(context.get(), &attr);
  }
  ContextPtr context;
  PdPtr pd;
  ibv_device_attr attr{};
};

// Records the CM events of the ids whose context it is; `then` runs after
// each one (from inside the pump's dispatch, as the daemon's handlers do).
class RecordingHandler : public CmHandler {
 public:
  std::vector<CmEvent> events;
  std::function<void(const CmEvent&)> then;
  void onCmEvent(const CmEvent& e) override {
    events.push_back(e);
    events.back().param.private_data = nullptr;  // the copy's vector moved with it
    if (then) then(e);
  }
  bool saw(rdma_cm_event_type type) const {
    for (const auto& e : events)
      if (e.type == type) return true;
    return false;
  }
};

// Records the completions and QP events of the QP it is attached to
// (Device::attach).
struct RecordingSink : CompletionSink {
  std::vector<ibv_wc> completions;
  std::vector<ibv_event_type> qpEvents;
  void onCompletion(const ibv_wc& wc) override { completions.push_back(wc); }
  void onQpEvent(ibv_event_type type) override { qpEvents.push_back(type); }
};

// Two RC queue pairs connected over 127.0.0.1 through `pump`, both on
// `device`'s protection domain and shared completion queue. The ids and
// QPs go before the device (declare the Loopback after it).
class Loopback {
 public:
  // `shape` may change each QP's attributes before it is created (its
  // receive side, say); `server` tells which end.
  using Shape = std::function<void(ibv_qp_init_attr&, bool server)>;
  Loopback(loop::EventLoop& loop, CmEventPump& pump, std::function<Device&(ibv_context*)> device,
           Shape shape = {})
      : loop_(loop), device_(std::move(device)), shape_(std::move(shape)) {
    listener_.then = [this](const CmEvent& e) { onRequest(e); };
    client_.then = [this](const CmEvent& e) { onClient(e); };
    if (Result<CmIdPtr> id = createCmId(pump.channel(), static_cast<CmHandler*>(&listener_)))
      listenId_ = std::move(id).value();
    if (Result<CmIdPtr> id = createCmId(pump.channel(), static_cast<CmHandler*>(&client_)))
      clientId_ = std::move(id).value();
    port_ = freePort();
    sockaddr_in a = ipv4("127.0.0.1", port_);
    ok_ = listenId_ && clientId_ && port_ != 0 &&
          rdma_bind_addr(listenId_.get(), asSockaddr(a)) == 0 &&
          rdma_listen(listenId_.get(), 4) == 0 &&
          rdma_resolve_addr(clientId_.get(), nullptr, asSockaddr(a), 2000) == 0;
  }
  // Steps the loop until both ends are established; false at the deadline.
  bool connect() {
    return ok_ &&
           stepUntil(loop_,
                     [this] {
                       return failed_ || (client_.saw(RDMA_CM_EVENT_ESTABLISHED) &&
                                          server_.saw(RDMA_CM_EVENT_ESTABLISHED));
                     }) &&
           !failed_;
  }

  ibv_qp* clientQp() const { return clientId_->qp; }
  ibv_qp* serverQp() const { return serverId_ ? serverId_->qp : nullptr; }

 private:
  ibv_qp_init_attr qpAttr(Device& d, bool server) {
    ibv_qp_init_attr a{};
    a.send_cq = a.recv_cq = d.cq();
    a.qp_type = IBV_QPT_RC;
    a.cap.max_send_wr = 8;
    a.cap.max_recv_wr = 8;
    a.cap.max_send_sge = a.cap.max_recv_sge = 1;
    if (shape_) shape_(a, server);
    return a;
  }
  void onClient(const CmEvent& e) {
    rdma_cm_id* id = clientId_.get();
    if (e.type == RDMA_CM_EVENT_ADDR_RESOLVED) {
      failed_ = rdma_resolve_route(id, 2000) != 0;
    } else if (e.type == RDMA_CM_EVENT_ROUTE_RESOLVED) {
      Device& d = device_(id->verbs);
      ibv_qp_init_attr a = qpAttr(d, false);
      failed_ = rdma_create_qp(id, d.pd(), &a) != 0;
      if (!failed_) clientQp_.reset(id);
      rdma_conn_param p{};
      p.retry_count = 3;
      p.rnr_retry_count = 7;
      failed_ = failed_ || rdma_connect(id, &p) != 0;
    } else if (e.type != RDMA_CM_EVENT_ESTABLISHED) {
      failed_ = true;
    }
  }
  void onRequest(const CmEvent& e) {
    if (e.type != RDMA_CM_EVENT_CONNECT_REQUEST || serverId_) return;
    serverId_.reset(e.id);
    e.id->context = static_cast<CmHandler*>(&server_);
    Device& d = device_(e.id->verbs);
    ibv_qp_init_attr a = qpAttr(d, true);
    failed_ = rdma_create_qp(e.id, d.pd(), &a) != 0;
    if (!failed_) serverQp_.reset(e.id);
    rdma_conn_param p{};
    p.rnr_retry_count = 7;
    failed_ = failed_ || rdma_accept(e.id, &p) != 0;
  }

  loop::EventLoop& loop_;
  std::function<Device&(ibv_context*)> device_;
  Shape shape_;
  RecordingHandler listener_, client_, server_;
  uint16_t port_ = 0;
  bool ok_ = false, failed_ = false;
  // Ids first: their QPs (CmQpPtr) go before them.
  CmIdPtr listenId_, clientId_, serverId_;
  CmQpPtr clientQp_, serverQp_;
};

}  // namespace rdmamsg::rdma::test
