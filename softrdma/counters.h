// The device's statistics, named as Soft-RoCE (rxe) names its port
// hw_counters (/sys/class/infiniband/rxe0/ports/1/hw_counters/*), so that a
// check written against rxe reads the same names here. Process-wide (one
// device, one port); read through the control channel's `counters` command
// (softrdma-ctl PATH counters). docs/softrdma.md says when each one counts.
#pragma once

#include <cstdint>
#include <string>

namespace softrdma {

enum class Counter : unsigned {
  SendRnr,           // send_rnr_err: a SEND found no receive WQE (responder)
  RnrRetryExceeded,  // retry_rnr_exceeded_err: a request failed RNR_RETRY_EXC_ERR
  RetryExceeded,     // retry_exceeded_err: a request failed RETRY_EXC_ERR
  LinkDowned,        // link_downed: the port lost its link
  RdmaSends,         // rdma_sends: SENDs completed successfully (requester)
  RdmaRecvs,         // rdma_recvs: receive WQEs completed successfully (responder)
  // softrdma's own (no rxe counterpart): rdma_connect or rdma_accept on a QP
  // with no receive posted (on its RQ or SRQ), the race that ends in RNR.
  ConnectWithoutRecv,  // connect_without_recv
  // softrdma's own: UD or UC datagrams a QP accepted (ready to receive, UD
  // qkey matched), placed or dropped for want of a receive or access.
  UdAccepted,  // ud_accepted
  // softrdma's own: RC frames received by a program's thread inside
  // ibv_poll_cq, ibv_start_poll or ibv_get_cq_event (inline progress), and
  // by the progress thread.
  RxInline,    // rx_inline
  RxProgress,  // rx_progress
  kCount,
};

void count(Counter c);
uint64_t counterValue(Counter c);
// -1 when `name` names no counter.
int64_t counterByName(const char* name);
// "name value" lines, one per counter, in the order above.
std::string formatCounters();

}  // namespace softrdma
