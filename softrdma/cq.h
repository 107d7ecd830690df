// Completion queues and completion channels (verbs_cq.cc; a CQ's inline
// progress, Cq::progress, is the transport's: conn.cc).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

#include "base.h"

namespace softrdma {

// The fd is an eventfd in semaphore mode: one count per queued record.
// Like the kernel's event files (and unlike a pipe), destroying the channel
// does not wake a thread blocked reading it.
struct CompChannel {
  ibv_comp_channel ch;
  std::mutex mu;
  std::deque<uint32_t> records;  // CQ handles
  // The CQs using it: ibv_get_cq_event makes their progress. list_mu is held
  // while it does (a try-lock: one thread at a time) and by ibv_destroy_cq.
  std::mutex list_mu;
  std::vector<Cq*> cq_list;
  std::atomic<int> cqs{0};
};
// Adds one record to an eventfd-backed channel.
void signalToken(int fd);
// Takes one token: blocks, or fails with EAGAIN per the fd's O_NONBLOCK.
bool takeToken(int fd);

struct Cq {
  // ibv_cq_ex begins with ibv_cq's fields (ibv_cq_ex_to_cq is a cast): a CQ
  // made by ibv_create_cq_ex is the same object seen through ibv_cq_ex.
  union {
    ibv_cq cq;
    ibv_cq_ex cqx;
  };
  uint32_t id = 0;  // handle carried in completion-channel records
  CompChannel* channel = nullptr;
  // Inline progress (verbs_cq.cc): an epoll instance holding the sockets of
  // the connections whose QPs complete here, so that a thread polling the CQ
  // (or getting its channel's events) receives what is waiting in them
  // itself instead of waiting for the progress thread. -1 in a forked child
  // for a CQ its parent made: those sockets are the parent's.
  int rx_epfd = -1;
  uint64_t fork_gen = 0;  // forkGeneration() when it was created
  std::mutex mu;
  std::vector<ibv_wc> ring;
  size_t head = 0, count = 0;
  bool armed = false, solicited_only = false, overrun = false;
  uint32_t events_reported = 0;  // guarded by cq.mutex (ibv_ack_cq_events uses it)
  std::atomic<int> qps{0};

  // The extended poll API (ibv_start_poll, ibv_next_poll, ibv_end_poll):
  // start_poll takes poll_mu and end_poll releases it (unless the CQ was
  // created single-threaded), so that batches of two pollers never mix.
  // Each completion is taken out of the ring when the iterator reaches it,
  // under mu like ibv_poll_cq; `current` is what the read_* accessors read.
  std::mutex poll_mu;
  bool single_threaded = false;
  ibv_wc current{};
  // Takes the next completion into `current`: 0, ENOENT (none) or
  // EOVERFLOW (the CQ overran).
  int takeCurrent();

  // Adds a completion; raises a channel event if armed and eligible.
  void push(const ibv_wc& wc, bool solicited);
  // Receives what waits in the sockets of this CQ's connections, on the
  // calling thread (no CQ lock held). True if any connection was ready.
  bool progress();
  // Drops every completion of `qp_num` (ibv_destroy_qp, modify to RESET).
  void clean(uint32_t qp_num);
};
// The CQ whose handle is `id` (completion-channel and async records), or nullptr.
Cq* findCq(uint32_t id);
// How many times this process is a forked child of one that used softrdma
// (0 in the first): objects made under another generation are a parent's.
uint64_t forkGeneration();

}  // namespace softrdma
