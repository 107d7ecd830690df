// Queue pairs, their send and receive queues, and shared receive queues
// (verbs_qp.cc, qp.cc, recv_queue.cc, post_send.cc, verbs_srq.cc; the
// extended post API: verbs_qp_ex.cc).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "base.h"

namespace softrdma {

struct RecvWqe {
  uint64_t wr_id;
  uint32_t num_sge;
  uint32_t sge_off;  // into the owner's sge storage
};

// A bounded ring of receive work requests (a QP's RQ or an SRQ).
struct RecvQueue {
  uint32_t max_wr = 0, max_sge = 0;
  std::vector<RecvWqe> ring;
  std::vector<ibv_sge> sges;
  size_t head = 0, count = 0;
  void init(uint32_t wr, uint32_t sge);
  int post(ibv_recv_wr* wr, ibv_recv_wr** bad);
  bool pop(RecvWqe& out, const ibv_sge*& sg);
  bool peek(RecvWqe& out, const ibv_sge*& sg) const;  // the next one, left in place
};

struct Srq {
  ibv_srq srq;
  std::mutex mu;
  RecvQueue rq;
  uint32_t limit = 0;
  std::atomic<int> qps{0};
};

// The SRQ whose handle is `id` (async records), or nullptr.
Srq* findSrq(uint32_t id);

struct SendWqe {
  uint64_t wr_id;
  uint32_t psn;
  uint32_t byte_len;
  ibv_wc_opcode opcode;
  bool signaled;
  bool injected;         // by the tamper hook (tamper.h): never a completion entry
  ibv_wc_status preset;  // a local error found at post time (reported at completion)
  uint32_t num_sge;      // RDMA READ destination
  uint32_t sge_off;
};

// A work request built with the ibv_wr_* API, waiting for ibv_wr_complete.
struct PendingWr {
  ibv_send_wr wr;        // sg_list and num_sge are set when the batch is posted
  uint32_t sge_off = 0;  // into WrBatch::sges
  uint32_t num_sge = 0;
  bool inline_data = false;  // the data is WrBatch::inline_data[inline_off, +inline_len)
  uint32_t inline_off = 0;
  uint32_t inline_len = 0;
};

struct WrBatch {
  std::vector<PendingWr> wrs;
  std::vector<ibv_sge> sges;
  std::vector<uint8_t> inline_data;
  int err = 0;  // the first error a builder or setter found (posting nothing)
  void clear() {
    wrs.clear();
    sges.clear();
    inline_data.clear();
    err = 0;
  }
};

struct Qp {
  // First: ibv_qp* and Qp* convert with reinterpret_cast. ibv_qp_ex begins
  // with an ibv_qp, as libibverbs' verbs_qp does.
  union {
    ibv_qp qp;
    ibv_qp_ex qpx;
  };
  std::weak_ptr<Qp> self;
  bool transport_lost = false;
  std::mutex mu;
  ibv_qp_cap cap{};
  bool sq_sig_all = false;
  Cq* scq = nullptr;
  Cq* rcq = nullptr;
  Srq* srq = nullptr;
  Pd* pd = nullptr;
  bool destroyed = false;
  // Attributes set through ibv_modify_qp.
  ibv_qp_attr attr{};
  // The send queue: work requests posted and not yet completed, in order,
  // the slots they hold, and the PSN of the next request.
  struct SendQueue {
    std::deque<SendWqe> wqes;
    std::vector<ibv_sge> sges;  // READ destinations, ring indexed by slot
    uint32_t slot = 0;
    uint32_t used = 0;             // slots held (unsignaled ones until a later signaled CQE)
    uint32_t unsignaled_done = 0;  // retired unsignaled WRs still holding a slot
    uint32_t next_psn = 0;
    bool halted = false;  // a request failed its local checks: nothing more is sent
  } sq;
  RecvQueue rq;
  std::shared_ptr<Conn> conn;
  std::shared_ptr<UdState> ud;  // a UD QP's socket and groups (ud.h)
  uint64_t rnr_events = 0;
  // Made by ibv_create_qp_ex: ibv_qp_to_qp_ex returns &qpx, whose wr_*
  // functions post through the batch (verbs_qp_ex.cc).
  bool extended = false;
  std::mutex wr_mu;  // held from ibv_wr_start to ibv_wr_complete / ibv_wr_abort
  WrBatch batch;

  ibv_qp_state state() const { return qp.state; }
  void setState(ibv_qp_state s);
  // The following expect mu held.
  void flushAll(ibv_wc_status first_status);  // QP → ERR, every WR completes
  void completeSendsUpTo(uint32_t psn, ibv_wc_status status_at_psn, bool psn_failed);
  void sendCompletion(const SendWqe& w, ibv_wc_status st);
  int modify(ibv_qp_attr* a, int mask);
};
std::shared_ptr<Qp> qpRef(ibv_qp* q);
// Posts `wr` (the data path of ibv_post_send). `all_or_nothing`: every WR is
// checked before any is posted, and an error posts none (ibv_wr_complete).
int postSend(Qp* qp, ibv_send_wr* wr, ibv_send_wr** bad, bool all_or_nothing);
// Sets the ibv_wr_* functions of an extended QP for `send_ops_flags`.
void setWrOps(Qp* qp, uint64_t send_ops_flags);
// A work request of the ibv_wr_* API, added to the QP's batch (verbs_qp_ex.cc).
PendingWr& buildWr(ibv_qp_ex* x, ibv_wr_opcode op);
std::shared_ptr<Qp> findQpByNum(uint32_t qpn);
// Every QP not destroyed (taken after detachDevice: none is created later
// on a dead context).
std::vector<std::shared_ptr<Qp>> allQps();

}  // namespace softrdma
