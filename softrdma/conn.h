// One TCP connection: the RC transport of one QP (conn.cc, conn_tx.cc,
// conn_rx.cc, conn_responder.cc) and the CM handshake that precedes it.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "base.h"
#include "fabric.h"
#include "qp.h"
#include "wire.h"

namespace softrdma {

enum class ConnRole { Active, Passive };

// One TCP connection: carries the CM handshake of one rdma_cm connection and
// then the RC traffic of the QP bound to it.
struct Conn : Endpoint, std::enable_shared_from_this<Conn> {
  explicit Conn(int sock, ConnRole r);
  ~Conn() override;
  void onEvents(uint32_t events) override;

  ConnRole role;
  std::atomic<bool> connecting{false};  // active side: TCP connect in progress
  bool manual = false;                  // a QP connected without rdma_cm (manual_qp.cc)

  // --- bindings (cm_mu)
  std::weak_ptr<CmId> id;
  std::weak_ptr<CmId> listener_id;  // passive: the listener that accepted it
  uint32_t remote_qpn = 0;
  bool qp_was_bound = false;
  CmMessage deferred_req{};  // passive: a REQ waiting for room in the backlog
  // --- QP binding (qp_mu)
  std::mutex qp_mu;
  std::shared_ptr<Qp> qp;
  void bindQp(const std::shared_ptr<Qp>& q);
  std::shared_ptr<Qp> boundQp();

  // --- transmit (tx_mu); any thread
  std::mutex tx_mu;
  struct Seg {
    const uint8_t* ext;  // nullptr: bytes live in tbuf at `off`
    size_t off, len;
    bool frame_start;
    bool request;
  };
  // The transmit side (tx_mu): what the socket has not taken yet, how the
  // connection's sending ends, and the ACK owed to the peer.
  struct Transmit {
    std::deque<Seg> txq;
    std::vector<uint8_t> tbuf;
    bool closed = false;
    bool want_out = false;
    bool close_after_flush = false;
    // A coalesced ACK (for unsignaled requests): it goes out in front of the
    // next frame this connection sends, or when the ACK timer fires.
    bool ack_owed = false;
    bool ack_timer = false;
    uint32_t owed_psn = 0;
  } tx;
  void oweAck(uint32_t psn);
  void sendOwedAck();
  // Queues header+payload; writes immediately when nothing is queued.
  // One piece of outgoing data; `stable` memory stays valid until the
  // request completes (a non-inline send buffer) and may be referenced
  // instead of copied when the socket is full. No default member
  // initializers: the arrays of these on the send path (hundreds of
  // entries) are left as they are until filled, not zeroed on every call.
  struct TxIov {
    const void* p;
    size_t len;
    bool stable;
    bool header;   // the first piece of a frame
    bool request;  // part of a request (dropped if the QP goes to error)
  };
  // Queues the pieces in order; writes at once when nothing is queued.
  void sendv(const TxIov* iov, int n);
  void sendvLocked(const TxIov* iov, int n);  // tx_mu held
  void sendFrame(FrameType t, uint32_t psn, uint16_t syndrome = 0, const void* payload = nullptr,
                 uint32_t len = 0);
  void flushLocked();
  void compactLocked();
  void shutdownAfterFlush();
  // The QP went to error: frames not yet begun are never sent, and the rest
  // of a partly sent frame is copied (its buffer goes back to the program).
  void abortData();

  // --- receive: whichever thread comes first (the progress thread on an
  // epoll event, a program's thread polling a CQ of the connection's QP):
  // progress() services the connection, or, when another thread is already
  // at it, makes that thread go round once more. The receive stream (rx)
  // and the responder state (responder) belong to the thread servicing it.
  void progress();
  // Who services the connection, and what other threads hand to that thread.
  struct Handoff {
    std::atomic<bool> busy{false};  // a thread is servicing the connection
    std::atomic<bool> want{false};  // it must go round once more
    // Work for the servicing thread from elsewhere: the RNR timer fired, the
    // peer hung up while the receive side was held, the connection was
    // severed (the reason: a string that lives forever).
    std::atomic<bool> rnr_due{false};
    std::atomic<bool> hup_seen{false};
    std::atomic<const char*> lost_why{nullptr};
  } handoff;
  // The rx epolls of the CQs this connection's socket is in (qp_mu), and
  // its key there (connByKey).
  uint64_t rx_key = 0;
  std::vector<int> rx_epfds;
  void watchFrom(const std::shared_ptr<Qp>& q);  // qp_mu held
  enum class Block { None, NotReady, Rnr };
  // Frame currently being received and what to do when its payload is in.
  struct Pending {
    enum Kind {
      None,
      Recv,
      Write,
      ReadReq,
      ReadResp,
      Atomic,
      Control,
      Cm,
      Discard,
      Nak
    } kind = None;
    Syndrome syndrome = Syndrome::None;
    RecvWqe wqe{};
    ibv_wc_status status = IBV_WC_SUCCESS;
    uint32_t byte_len = 0;
    std::vector<uint8_t> cm;  // CM payload
    AtomicArgs atomic{};      // an atomic request's operands
  };
  // The receive stream: bytes read from the socket, the frame being
  // received, where its payload goes, and why reading waits.
  struct Receive {
    std::vector<uint8_t> rbuf;
    size_t rpos = 0, rend = 0;
    bool have_hdr = false;
    bool hdr_handled = false;
    FrameHeader hdr{};
    size_t remaining = 0;     // payload bytes still to place
    std::vector<iovec> dest;  // where they go (empty: discard)
    size_t dest_idx = 0;
    Pending cur;
    Block block = Block::None;
  } rx;
  // This side as the responder: the peer's requests in sequence, the ACKs
  // and NAKs for them, RNR retries, and the receive completions they make.
  struct Responder {
    uint32_t rx_psn = 0;  // next request PSN expected from the peer
    int rnr_tries = 0;
    bool rnr_timer = false;
    bool discard_requests = false;  // after a NAK, until the requester stops
    uint32_t acked_psn = 0;
    bool ack_pending = false;
    bool ack_now = false;  // a request of this pass asked for an immediate ACK
    // Receive completions of this pass: made visible only after their ACK is
    // queued, as an HCA acknowledges before the CQE can be polled.
    std::vector<std::pair<ibv_wc, bool>> pending_cqes;
  } responder;
  std::atomic<bool> eof{false};
  void service();  // the receive side is this thread's (progress)
  // What other threads handed over (handoff: lost_why, hup_seen, rnr_due),
  // done; false when the receive loop must not run.
  bool takeHandedWork();
  void kick();  // service again on the progress thread
  void fail(const char* why);
  bool readMore();
  void place(const uint8_t* p, size_t n);
  bool handleHeader(const std::shared_ptr<Qp>& q);
  bool handleRequest(Qp& q);
  bool remoteAccess(Qp& q, FrameType t);  // WRITE, WRITE with immediate, READ
  void waitForReceive(Qp& q);             // RNR: none posted; retried on a timer
  void targetReceive(Qp& q, const RecvWqe& wqe, const ibv_sge* sg);
  bool handleResponse(Qp& q);
  // Atomics (atomics.cc): the responder's checks, its execution and
  // response; the requester's placing of the original value.
  bool atomicRequest(Qp& q);
  void executeAtomic(Qp& q);
  bool atomicResponse(Qp& q);
  void finishFrame(const std::shared_ptr<Qp>& q);
  void finishRequest(Qp& q);
  void onRnrTimer();  // service(): rnr_due was set
  void flushAcks(const std::shared_ptr<Qp>& q);
  void flushAcksLocked(Qp* q);  // q->mu held
  void onPeerGone(const char* why, bool garbage = false);
  // The local device or port went away: the TCP connection is shut down
  // (the peer sees a dead peer) and this side reports the loss the same way
  // (progress thread).
  void sever(const char* why);
};
// The connection registered in rx epolls under `key`, or null.
std::shared_ptr<Conn> connByKey(uint64_t key);

// Atomics on the requester's side (atomics.cc): whether an atomic work
// request may be posted (`wr_api`: built with ibv_wr_*, which checks
// less), and its frame (header and operands) for the connection.
bool atomicWrValid(const ibv_send_wr& w, uint64_t len, bool wr_api);
int addAtomicFrame(FrameHeader& h, AtomicArgs& args, Conn::TxIov* iov, int niov, const Qp& qp,
                   const ibv_send_wr& w, const SendWqe& e);

}  // namespace softrdma
