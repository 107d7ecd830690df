// The mesh: this daemon's rdma_cm listener, its device resources, every
// configured peer and every connection.
//
// Incoming CONNECT_REQUESTs are checked (handshake magic and version, meant
// for this node, from a configured peer) and then put to the peer's
// tie-break: exactly one connection per pair remains even when both ends
// dial at once — the connection initiated by the node with the lower name
// survives — and a peer that restarted (new incarnation) replaces its stale
// connection. Rejections carry the reason in the REJ's private data.
//
// Connections are owned here and destroyed on a later loop turn once their
// teardown is complete, never inside their own callbacks.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "daemon/loop/events.h"
#include "daemon/peer/connection.h"
#include "daemon/peer/peer.h"
#include "daemon/rdma/cm_events.h"
#include "daemon/rdma/device.h"

namespace rdmamsg::peer {

class Mesh : public rdma::CmHandler {
 public:
  Mesh(loop::EventLoop& loop, const config::Config& cfg, PeerEvents& events, uint64_t incarnation);
  ~Mesh() override;

  // Binds and listens on config.listen, then starts dialing. Throws
  // std::runtime_error with a clear message when it cannot.
  void start();
  // Closes every connection; `done` runs once they are all torn down (or
  // after a bounded wait).
  void shutdown(std::function<void()> done);

  Peer* peer(std::string_view name);
  const std::vector<std::unique_ptr<Peer>>& peers() const { return peers_; }
  uint64_t incarnation() const { return incarnation_; }
  size_t connectionCount() const { return conns_.size(); }
  uint64_t droppedCompletions() const;
  void resumeReceiving();

  // For peers.
  Connection* dial(Peer& peer);
  void reap(Connection* c);

  void onCmEvent(const rdma::CmEvent& e) override;

 private:
  ConnParams paramsFor(const Peer& peer) const;
  rdma::Device* deviceFor(ibv_context* ctx);
  void onConnectRequest(const rdma::CmEvent& e);
  void reject(rdma_cm_id* id, RejectReason reason, const std::string& who);
  void checkShutdownDone();

  loop::EventLoop& loop_;
  const config::Config& config_;
  PeerEvents& events_;
  uint64_t incarnation_;
  // Declared parents first: destroyed children first.
  std::unique_ptr<rdma::CmEventPump> pump_;
  std::map<ibv_context*, std::unique_ptr<rdma::Device>> devices_;
  rdma_cm_id* listenId_ = nullptr;
  std::vector<std::unique_ptr<Peer>> peers_;  // fixed for the daemon's life
  Peer* lastPeer_ = nullptr;                  // peer()'s last answer
  std::vector<std::unique_ptr<Connection>> conns_;
  std::vector<Connection*> reapable_;
  std::unique_ptr<loop::Deferred> reaper_;
  std::function<void()> shutdownDone_;
  std::unique_ptr<loop::Timer> shutdownTimer_;
};

}  // namespace rdmamsg::peer
