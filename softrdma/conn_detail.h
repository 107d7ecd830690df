// What the parts of the RC transport share (conn.cc, conn_tx.cc,
// conn_rx.cc, conn_responder.cc): its buffer sizes and timings, and the
// flag that tells inline progress from the progress thread's.
#pragma once

#include <sys/epoll.h>

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "fork_hooks.h"
#include "wire.h"

namespace softrdma {

constexpr size_t kRxBuffer = 256 * 1024;
constexpr size_t kDirectRead = 64 * 1024;  // read straight into the destination above this
constexpr size_t kReferenceAbove = 16 * 1024;
constexpr size_t kServiceBudget = 8 * 1024 * 1024;
constexpr uint32_t kEvIn = EPOLLIN | EPOLLRDHUP | EPOLLET;
// The longest an ACK for unsignaled requests waits for a frame to ride on.
// The requester cannot observe it (only signaled WRs complete, and their
// ACKs go at once), so this only bounds how long its send queue keeps the
// entries.
constexpr auto kAckDelay = std::chrono::microseconds(500);

// The calling thread is making progress inside ibv_poll_cq or
// ibv_get_cq_event (counted as rx_inline, not rx_progress).
inline thread_local bool t_inline = false;

inline bool isRequest(FrameType t) {
  return t == FrameType::Send || t == FrameType::SendImm || t == FrameType::SendInv ||
         t == FrameType::Write || t == FrameType::WriteImm || t == FrameType::ReadReq ||
         t == FrameType::FetchAdd || t == FrameType::CmpSwap;
}

// softrdma_corrupt_next_recv (conn_responder.cc): the next successful
// receive completion lies; applied where receive completions are made.
void applyTestCorruption(ibv_wc& wc);
void forkCorruption(ForkStep s);

}  // namespace softrdma
