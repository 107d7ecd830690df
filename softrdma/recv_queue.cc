// A bounded ring of receive work requests: a QP's receive queue or an SRQ's.
#include <cerrno>

#include "qp.h"

namespace softrdma {

void RecvQueue::init(uint32_t wr, uint32_t sge) {
  max_wr = wr;
  max_sge = sge;
  ring.assign(wr, RecvWqe{});
  sges.assign(static_cast<size_t>(wr) * (sge ? sge : 1), ibv_sge{});
}

int RecvQueue::post(ibv_recv_wr* wr, ibv_recv_wr** bad) {
  for (ibv_recv_wr* w = wr; w != nullptr; w = w->next) {
    if (w->num_sge < 0 || static_cast<uint32_t>(w->num_sge) > max_sge) {
      *bad = w;
      return EINVAL;
    }
    if (count == max_wr) {
      *bad = w;
      return ENOMEM;
    }
    size_t slot = (head + count) % max_wr;
    RecvWqe& e = ring[slot];
    e.wr_id = w->wr_id;
    e.num_sge = static_cast<uint32_t>(w->num_sge);
    e.sge_off = static_cast<uint32_t>(slot * (max_sge ? max_sge : 1));
    if (w->num_sge > 0) memcpy(&sges[e.sge_off], w->sg_list, sizeof(ibv_sge) * w->num_sge);
    count++;
  }
  return 0;
}

bool RecvQueue::peek(RecvWqe& out, const ibv_sge*& sg) const {
  if (count == 0) return false;
  out = ring[head];
  sg = &sges[out.sge_off];
  return true;
}

bool RecvQueue::pop(RecvWqe& out, const ibv_sge*& sg) {
  if (count == 0) return false;
  out = ring[head];
  sg = &sges[out.sge_off];
  head = (head + 1) % max_wr;
  count--;
  return true;
}

// -------------------------------------------------------------- Qp core

}  // namespace softrdma
