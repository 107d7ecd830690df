// A context's operations, filled in by openContext (verbs_context.cc) from
// the modules that implement them: the data path (verbs_cq.cc,
// post_send.cc), the extended calls (verbs_cq.cc, verbs_qp_ex.cc,
// verbs_query.cc) and memory windows (mw.cc).
#pragma once

#include "base.h"

namespace softrdma {

// A new context on `dev` (ibv_open_device: cmd_fd -1, a descriptor of its
// own is made); `cmd_fd` >= 0 is taken over (ibv_import_device).
ibv_context* openContext(ibv_device* dev, int cmd_fd);

int pollCqOp(ibv_cq* cq, int n, ibv_wc* wc);
int reqNotifyCqOp(ibv_cq* cq, int solicited_only);
int postSendOp(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad);
int postRecvOp(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad);
int postSrqRecvOp(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad);
int queryPortOp(ibv_context* ctx, uint8_t port, ibv_port_attr* a, size_t len);
// The extended ops of a context (verbs_context).
ibv_qp* createQpExOp(ibv_context* ctx, ibv_qp_init_attr_ex* ax);
ibv_cq_ex* createCqExOp(ibv_context* ctx, ibv_cq_init_attr_ex* a);
int queryDeviceExOp(ibv_context* ctx, const ibv_query_device_ex_input* input,
                    ibv_device_attr_ex* attr, size_t attr_size);
// Memory windows (mw.cc). The context's alloc_mw, dealloc_mw and bind_mw.
void setMwOps(ibv_context* ctx);

}  // namespace softrdma
