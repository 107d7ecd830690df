// A probe of one rail: does this node's address on it reach the peer's
// daemon on the peer's address of the same rail? It resolves the address
// and the route from the rail's local address and sends a CONNECT_REQUEST
// without a queue pair, whose Hello carries kHelloProbe (protocol.h). The
// peer's daemon checks it as any request (magic, version, target, that it
// comes from this node's configured address) and answers with a REJ of
// reason kProbed: the rail reached it. Any other refusal (nobody
// listening, shutting down) also came back over the rail: reached too.
// No answer within the timeout, an address or route error, unreachable:
// the rail failed. A probe costs an rdma_cm id and a CM exchange; no QP,
// no buffers.
//
// Like a connection, it never calls up: it marks its owner (the waker) when
// it has a result, and the owner (Peer) reads it in its service step and
// destroys it there, outside the probe's own callbacks.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "daemon/loop/events.h"
#include "daemon/loop/service_queue.h"
#include "daemon/peer/protocol.h"
#include "daemon/rdma/cm_events.h"
#include "daemon/rdma/verbs.h"

namespace rdmamsg::peer {

class RailProbe final : public rdma::CmHandler {
 public:
  enum class Outcome { kPending, kReached, kFailed };

  RailProbe(loop::EventLoop& loop, std::size_t rail, const Hello& hello, std::optional<uint8_t> tos,
            std::chrono::milliseconds timeout, loop::ServiceQueue::Waker wake);
  ~RailProbe() override;
  RailProbe(const RailProbe&) = delete;
  RailProbe& operator=(const RailProbe&) = delete;

  void start(rdma_event_channel* channel, const sockaddr* src, const sockaddr* dst);
  std::size_t rail() const { return rail_; }
  Outcome outcome() const { return outcome_; }
  // Why it failed, or how it was answered.
  const std::string& detail() const { return detail_; }
  // The RDMA device the rail's address resolved to ("" before).
  const std::string& device() const { return device_; }

  void onCmEvent(const rdma::CmEvent& e) override;

 private:
  void finish(Outcome o, std::string detail);
  void connect();

  std::size_t rail_;
  Hello hello_;
  std::optional<uint8_t> tos_;
  std::chrono::milliseconds timeout_;
  loop::ServiceQueue::Waker wake_;
  Outcome outcome_ = Outcome::kPending;
  std::string detail_, device_;
  rdma::CmIdPtr id_;
  std::unique_ptr<loop::Timer> timer_;
};

}  // namespace rdmamsg::peer
