// A configured peer daemon: its current connection, the messages on their
// way to it, and what it sends us.
//
// Outbound: a message from a local client gets the next sequence number of
// the connection and is written straight into the connection's open batch
// when credits allow (no copy, no allocation); otherwise it waits in a
// bounded queue (send_queue_limit bytes) — over the limit the router stops
// reading the sending client. Every sent message stays "in flight" until the
// peer confirms its delivery (or failure); if the connection is lost or the
// message times out, its sender is told. Nothing is dropped silently.
//
// Inbound: messages (reassembled from fragments) go to the router in order;
// their outcomes go back to the peer as confirmations, batched.
//
// Liveness: heartbeats when idle; a peer silent for heartbeat_timeout is
// disconnected. Dialing uses exponential backoff with jitter; both ends dial
// and the mesh keeps exactly one connection per pair (mesh.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "common/byte_buffer.h"
#include "common/status.h"
#include "config/config.h"
#include "daemon/loop/events.h"
#include "daemon/peer/connection.h"
#include "daemon/ring.h"

namespace rdmamsg::peer {

class Mesh;
class Peer;

enum class Delivery { kDelivered, kUnknownService, kCongested };

// The router's side of a peer.
class PeerEvents {
 public:
  virtual ~PeerEvents() = default;
  // A message for a local service. kCongested: offer it again later
  // (Mesh::resumeReceiving), the connection stops consuming meanwhile.
  virtual Delivery deliverIncoming(Peer& from, std::string_view srcService,
                                   std::string_view dstService,
                                   std::span<const std::byte> payload) = 0;
  // The outcome of a message a local client sent.
  virtual void outcome(uint64_t session, uint64_t msgId, const Status& status) = 0;
  // Messages msgId .. msgId + count - 1 of one client were delivered (a
  // stream's confirmations settle many at once).
  virtual void delivered(uint64_t session, uint64_t msgId, uint64_t count) = 0;
  // The peer's outbound queue went back under its limit.
  virtual void queueDrained(Peer& peer) = 0;
};

struct PeerCounters {
  uint64_t messagesSent = 0;
  uint64_t messagesReceived = 0;
  uint64_t bytesSent = 0;
  uint64_t bytesReceived = 0;
  uint64_t confirmed = 0;
  uint64_t failed = 0;
  uint64_t connects = 0;
  uint64_t heartbeatsSent = 0;
};

class Peer : public ConnectionOwner {
 public:
  Peer(loop::EventLoop& loop, Mesh& mesh, const config::Config& cfg, config::Peer peer,
       PeerEvents& events);
  ~Peer() override;

  const std::string& name() const { return cfg_.name; }
  const config::Address& address() const { return cfg_.address; }
  uint64_t id() const { return id_; }
  bool established() const;
  std::string state() const;
  const std::string& lastError() const { return lastError_; }
  const PeerCounters& counters() const { return counters_; }
  const Connection* connection() const { return conn_; }
  size_t queuedBytes() const { return queuedBytes_; }
  size_t inFlight() const { return inflight_.size(); }
  uint64_t remoteIncarnation() const;

  void start();     // begin dialing
  void shutdown();  // stop dialing, close the connection

  // Sends a message. Errors: peer_unreachable. `overLimit` tells the caller
  // to stop reading the client until queueDrained().
  Status send(uint64_t session, uint64_t msgId, std::string_view srcService,
              std::string_view dstService, std::span<const std::byte> payload, bool& overLimit);

  // The mesh's tie-break for a CONNECT_REQUEST from this peer; kNone: accept.
  RejectReason admit(const Hello& hello, bool selfIsLower);
  void adopt(Connection* c);  // the accepted connection becomes current
  void resumeReceiving();

  // ConnectionOwner
  void onEstablished(Connection& c) override;
  bool onRecord(Connection& c, const Record& r) override;
  void onWritable(Connection& c) override;
  void beforeFlush(Connection& c) override;
  void onClosed(Connection& c, const std::string& why) override;
  void onReapable(Connection& c) override;
  void onRejected(Connection& c, RejectReason reason) override;

 private:
  // A queued message in queue_: this header, then the two service names and
  // the payload (the part not yet written).
  struct Queued {
    uint64_t seq;
    uint64_t offset;  // payload bytes already written into batches
    uint32_t length;  // payload bytes stored
    uint8_t srcLen, dstLen;
    bool started;  // its first fragment is out
    uint8_t reserved;
  };
  struct InFlight {
    uint64_t seq;
    uint64_t session;
    uint64_t msgId;
    std::chrono::steady_clock::time_point deadline;
    uint8_t serviceLen;
    char service[63];  // the destination service, to name it in errors
  };
  struct ConfirmRange {
    uint64_t first, last;
    uint16_t errc;
  };

  void dial();
  void scheduleDial();
  void onTick();
  void pump();
  bool writeConfirms();
  // Writes (the rest of) a message; true when all of it is in batches.
  bool writeMessage(uint64_t seq, std::string_view src, std::string_view dst,
                    std::span<const std::byte> payload, size_t& offset, bool& started);
  void confirm(uint64_t seq, Errc errc);
  void failAll(const Status& why);
  bool handleMessage(Connection& c, const Record& r);
  void settle(uint64_t first, uint64_t last, Errc errc);

  loop::EventLoop& loop_;
  Mesh& mesh_;
  const config::Config& config_;
  config::Peer cfg_;
  PeerEvents& events_;
  uint64_t id_;
  bool stopping_ = false;

  Connection* conn_ = nullptr;  // current connection (owned by the mesh)
  bool up_ = false;             // conn_ reached established
  std::string lastError_ = "not connected yet";
  int attempts_ = 0;
  std::unique_ptr<loop::Timer> dialTimer_, tickTimer_;
  std::mt19937_64 rng_;

  // Outbound
  uint64_t nextSeq_ = 1;
  ByteBuffer queue_;  // Queued records, in order; no allocation per message
  size_t queuedBytes_ = 0;
  bool overLimit_ = false;
  Ring<InFlight> inflight_;
  std::vector<ConfirmRange> confirms_;

  // Inbound
  uint64_t expectedSeq_ = 1;
  std::vector<std::byte> reasm_;
  uint64_t reasmSeq_ = 0, reasmTotal_ = 0;
  bool reasmActive_ = false, reasmComplete_ = false;
  bool reasmDiscard_ = false;  // over our max_message_size: answered too_large
  std::string reasmSrc_, reasmDst_;
  bool receivePaused_ = false;

  PeerCounters counters_;
};

}  // namespace rdmamsg::peer
