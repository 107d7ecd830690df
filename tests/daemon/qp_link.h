// Test support for the send and receive sides of a connection (Sender,
// Receiver, ReceiveSupply): a real event loop, softrdma's device opened as
// the daemon opens it (rdma::Device, with its pools), and a loopback pair
// of RC queue pairs on it whose completions are recorded per QP. Tests step
// the loop until a condition holds, with a deadline.
#pragma once

#include <chrono>
#include <memory>

#include "daemon/loop/event_loop.h"
#include "daemon/rdma/cm_events.h"
#include "daemon/rdma/device.h"
#include "tests/daemon/rdma_fixture.h"

namespace rdmamsg::rdma::test {

// Declare it before what holds the device's buffers (a Sender attached to
// its pool, a Receiver): those go first.
class QpLink {
 public:
  QpLink() { budget.limit = 1 << 30; }
  ~QpLink() {
    if (device && loopback) {
      device->detach(clientQp()->qp_num);
      if (serverQp() != nullptr) device->detach(serverQp()->qp_num);
    }
  }

  // Opens the device with `pools` and connects the two QPs (`shape`: their
  // attributes); false when either failed.
  bool connect(const PoolParams& pools, Loopback::Shape shape = {}) {
    pools_ = pools;
    loopback = std::make_unique<Loopback>(
        loop, pump, [this](ibv_context* ctx) -> Device& { return deviceOf(ctx); },
        std::move(shape));
    if (!loopback->connect()) return false;
    device->attach(clientQp()->qp_num, &client);
    device->attach(serverQp()->qp_num, &server);
    return true;
  }
  // The device, opened at the first QP (its context is the rdma_cm id's).
  Device& deviceOf(ibv_context* ctx) {
    if (!device) {
      Result<std::unique_ptr<Device>> d = Device::open(loop, ctx, 256, pools_, budget, nullptr);
      if (!d) throw std::runtime_error(d.status().toString());
      device = std::move(d).value();
    }
    return *device;
  }
  // Opens the device alone (no QPs), on softrdma's first device.
  bool openDevice(const PoolParams& pools) {
    pools_ = pools;
    Result<std::unique_ptr<Device>> d =
        Device::open(loop, context_.context.get(), 256, pools_, budget, nullptr);
    if (d) device = std::move(d).value();
    return device != nullptr;
  }

  ibv_qp* clientQp() const { return loopback->clientQp(); }
  ibv_qp* serverQp() const { return loopback->serverQp(); }
  template <typename Cond>
  bool stepUntil(Cond&& cond, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    return test::stepUntil(loop, std::forward<Cond>(cond), timeout);
  }

  loop::EventLoop loop;
  CmEventPump pump{loop};
  MemoryBudget budget;
  OpenDevice context_;  // for openDevice(); the QPs' device is their ids'
  std::unique_ptr<Device> device;
  RecordingSink client, server;
  std::unique_ptr<Loopback> loopback;  // after the device: its QPs go first

 private:
  PoolParams pools_;
};

}  // namespace rdmamsg::rdma::test
