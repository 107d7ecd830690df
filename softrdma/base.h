// What every part of softrdma shares: the exported-symbol marker, the clock,
// the device limits, errno and logging helpers, and the names of the main
// objects (each defined in a header of its own: qp.h, cq.h, conn.h, cm_id.h).
//
// Ownership: objects handed to C callers are owned by softrdma from create
// to destroy. Objects that the progress thread may still be using when the
// program destroys them (QPs, connections, cm ids) are held by shared_ptr;
// the C pointer stays valid until the last reference goes.
//
// Lock order (outer to inner): a connection's receive side (Conn::progress,
// a try-lock) → Fabric::cm_mu → Qp::mu → Srq::mu → Cq::mu; Conn::tx_mu and
// the channel/timer locks are leaves. Fabric::cm_mu → the Fabric's own lock
// (cmContext) → the device lock (open contexts).
#pragma once

#include <infiniband/verbs.h>

#include <chrono>
#include <cstddef>
#include <cstdint>

#define SOFTRDMA_API extern "C" __attribute__((visibility("default")))

namespace softrdma {

using Clock = std::chrono::steady_clock;

// Device limits reported by ibv_query_device and enforced on every call.
constexpr uint32_t kMaxQpWr = 16384;
constexpr uint32_t kMaxSge = 32;
// Inline data: rxe's limit. A QP is granted max(16 * max_send_sge,
// max_inline_data) bytes (grantSendCap, verbs_qp.cc).
constexpr uint32_t kMaxInline = 512;
constexpr int kMaxCqe = (1 << 22) - 1;
// The max_cqe the device reports and enforces: kMaxCqe, or less when
// SOFTRDMA_MAX_CQE says so (a small device, for tests).
int maxCqe();
constexpr uint32_t kMaxSrqWr = 16384;
constexpr uint8_t kMaxRdAtom = 16;
constexpr size_t kConnectPrivateData = 56;  // IB CM REQ, after the 36-byte CMA header
constexpr size_t kAcceptPrivateData = 196;  // IB CM REP
constexpr size_t kRejectPrivateData = 148;  // IB CM REJ

int setErr(int err);  // sets errno = err, returns -1
void debugLog(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void warnLog(const char* fmt, ...) __attribute__((format(printf, 1, 2)));  // always printed

struct Qp;
struct Cq;
struct Srq;
struct Conn;
struct CmId;
struct UdState;  // ud.h
struct Context;  // device.h
struct Pd;       // pd_mr.h
struct Mr;

}  // namespace softrdma
