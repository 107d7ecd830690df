/* softrdma's test hooks: faults and timings a real NIC produces rarely or
 * never on demand, for testing programs that run on softrdma. Not part of
 * rdma-core's API: a program that calls them runs only on softrdma (declare
 * them weak to probe for it). docs/softrdma-reference.md, "Test hooks". */
#pragma once

#include <rdma/rdma_cma.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* While `hold` is non-zero, events queued on `channel` are not signalled on
 * its fd; hold = 0 signals every held event with one write, so that they
 * are all pending on a single edge of an edge-triggered poller. Returns the
 * number of events held so far (with hold = 0: the number released), or -1
 * with errno EINVAL. */
int softrdma_hold_cm_events(struct rdma_event_channel* channel, int hold);

/* The next successful receive completion in this process (any QP) reports
 * `opcode` and `byte_len` instead of what it carried: a malformed
 * completion. SOFTRDMA_KEEP_BYTE_LEN keeps the length it carried. */
#define SOFTRDMA_KEEP_BYTE_LEN UINT32_MAX
void softrdma_corrupt_next_recv(enum ibv_wc_opcode opcode, uint32_t byte_len);

/* While held (hold non-zero), the progress thread stops between two turns:
 * no timer runs and no connection is read by it, so the only progress made
 * is what programs' threads make inline, in ibv_poll_cq, ibv_start_poll and
 * ibv_get_cq_event. hold = 0 releases one hold. Returns 0. */
int softrdma_hold_progress(int hold);

/* A device counter by name (softrdma-ctl PATH counters lists them); -1 when
 * there is no such counter. */
int64_t softrdma_counter(const char* name);

#ifdef __cplusplus
}
#endif
