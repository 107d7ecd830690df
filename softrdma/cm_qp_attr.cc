// The QP attributes a connected (or UD) rdma_cm id gives its QP for each
// state — what the kernel's rdma_init_qp_attr returns — and the
// transitions rdma_cm makes on the id's QP with them.
#include <cerrno>
#include <cstring>

#include "base.h"
#include "cm_id.h"
#include "cm_internal.h"
#include "conn.h"
#include "device.h"
#include "qp.h"

namespace softrdma {

int udInitQpAttr(CmId* id, ibv_qp_attr* a, int* mask) {
  (void)id;
  switch (a->qp_state) {
    case IBV_QPS_INIT:
      a->pkey_index = 0;
      a->port_num = 1;
      a->qkey = RDMA_UDP_QKEY;  // cma_set_qkey's for the UDP port space
      *mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
      return 0;
    case IBV_QPS_RTR:
    case IBV_QPS_ERR:
    case IBV_QPS_RESET:
      *mask = IBV_QP_STATE;
      return 0;
    case IBV_QPS_RTS:
      a->sq_psn = 0;
      *mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
      return 0;
    default:
      return EINVAL;
  }
}

// The attributes rdma_cm gives a connected QP for each state (what the
// kernel's rdma_init_qp_attr returns). Returns an errno value.
int initQpAttr(rdma_cm_id* rid, ibv_qp_attr* a, int* mask) {
  CmId* id = toCmId(rid);
  ibv_qp_state to = a->qp_state;
  memset(a, 0, sizeof *a);
  a->qp_state = to;
  if (isUdId(id)) return udInitQpAttr(id, a, mask);
  switch (to) {
    case IBV_QPS_INIT:
      a->pkey_index = 0;
      a->port_num = 1;
      // What the kernel's CM gives a connected RC QP (remote read and
      // atomic with responder resources, which softrdma always grants).
      a->qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                           IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
      *mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
      return 0;
    case IBV_QPS_RTR:
      a->path_mtu = IBV_MTU_4096;
      a->dest_qp_num = id->params.remote_qpn;
      a->rq_psn = 0;
      a->max_dest_rd_atomic = id->params.responder_resources ? id->params.responder_resources : 1;
      a->min_rnr_timer = 0;  // 655.36 ms, as the kernel's CM sets it
      a->ah_attr.is_global = 1;
      a->ah_attr.port_num = 1;
      a->ah_attr.grh.dgid = rid->route.addr.addr.ibaddr.dgid;
      a->ah_attr.grh.hop_limit = 64;
      a->ah_attr.grh.traffic_class = id->path.traffic_class;  // RDMA_OPTION_ID_TOS
      *mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
              IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
      return 0;
    case IBV_QPS_RTS:
      a->sq_psn = 0;
      a->timeout = id->opts.ack_timeout;
      a->retry_cnt = id->params.remote_retry & 7;
      a->rnr_retry = id->params.remote_rnr_retry & 7;
      a->max_rd_atomic = id->params.initiator_depth ? id->params.initiator_depth : 1;
      *mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
              IBV_QP_MAX_QP_RD_ATOMIC;
      return 0;
    case IBV_QPS_ERR:
    case IBV_QPS_RESET:
      *mask = IBV_QP_STATE;
      return 0;
    default:
      return EINVAL;
  }
}

int cmModifyQp(CmId* id, ibv_qp_state to) {
  auto qp = qpRef(id->id.qp);
  if (!qp) return EINVAL;
  if (contextDead(qp->qp.context)) return EIO;  // as ibv_modify_qp on a removed device
  ibv_qp_attr a{};
  a.qp_state = to;
  int mask = 0;
  int rc = initQpAttr(&id->id, &a, &mask);
  if (rc != 0) return rc;
  std::shared_ptr<Conn> conn;
  {
    std::lock_guard lk(qp->mu);
    rc = qp->modify(&a, mask);
    conn = qp->conn;
  }
  if (rc == 0 && conn && (to == IBV_QPS_RTR || to == IBV_QPS_ERR)) conn->kick();
  return rc;
}

}  // namespace softrdma

using namespace softrdma;

SOFTRDMA_API int rdma_init_qp_attr(rdma_cm_id* id, ibv_qp_attr* a, int* mask) {
  if (id == nullptr || a == nullptr || mask == nullptr) return setErr(EINVAL);
  int rc = initQpAttr(id, a, mask);
  return rc == 0 ? 0 : setErr(rc);
}
