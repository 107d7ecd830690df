// The process-wide Fabric: the progress thread, the endpoints it polls
// (fabric.cc), its timers, librdmacm's per-device context (fabric_cm.cc) and
// fork handling (fork.cc).
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "base.h"

namespace softrdma {

struct Context;
struct Pd;

// Something the progress thread polls. Every endpoint is listed process-wide
// (fork.cc), so that a forked child can close its copies of their sockets.
struct Endpoint {
  Endpoint();
  virtual ~Endpoint();
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;
  virtual void onEvents(uint32_t events) = 0;
  int fd = -1;
  std::atomic<bool> dead{false};
};

class Fabric {
 public:
  static Fabric& get();

  void add(const std::shared_ptr<Endpoint>& ep, uint32_t events);
  void modify(Endpoint* ep, uint32_t events);
  void remove(const std::shared_ptr<Endpoint>& ep);
  // Runs `fn` on the progress thread at `when` (or as soon as possible).
  void schedule(Clock::time_point when, std::function<void()> fn);
  void post(std::function<void()> fn) { schedule(Clock::time_point{}, std::move(fn)); }

  // librdmacm's context on device `index`, opened on first use, and its
  // default PD; nullptr while the device is absent. A context whose device
  // was removed is retired (closed once no id uses it) and a new one opened.
  Context* cmContext(int index);
  Pd* cmPd(int index);
  struct Retired {
    Context* ctx;
    Pd* pd;
  };
  std::vector<Retired> takeRetired();
  void keepRetired(const std::vector<Retired>& r);
  // Every endpoint the progress thread polls.
  std::vector<std::shared_ptr<Endpoint>> endpoints();

  std::mutex cm_mu;  // every rdma_cm state change
  std::condition_variable cm_cv;

  // Tunables from the environment (docs/softrdma.md).
  int timewait_ms = 100;
  int cm_timeout_ms = 3000;

  // fork() (fork.cc). Before: the progress thread stops between two turns
  // and the Fabric's locks are taken. After, in the parent: released, the
  // thread goes on. In the child, which has no progress thread: the
  // inherited Fabric is abandoned without touching the kernel objects it
  // shares with the parent (its epoll instance above all); the next get()
  // builds a new one.
  static void forkPrepare();
  static void forkParent();
  static void forkChild();
  // softrdma_hold_progress: the progress thread stops between two turns
  // (hold) or goes on (release); holds nest, as fork's do.
  void holdProgress(bool hold);

 private:
  Fabric();
  void run();
  void wake();
  void park();  // progress thread: waits while a fork is under way
  bool onProgressThread() const { return std::this_thread::get_id() == thread_id_; }
  Context* cmContextLocked(int index);
  static std::atomic<Fabric*> instance_;
  static std::mutex instance_mu_;  // creating the instance
  int epfd_ = -1;
  int wakefd_ = -1;
  int timerfd_ = -1;  // wakes the progress thread for a timer scheduled elsewhere
  // The latest the progress thread sleeps until (mu_): min while it is
  // awake, max when it waits for events alone.
  Clock::time_point sleeping_until_ = Clock::time_point::min();
  std::mutex park_mu_;
  std::condition_variable park_cv_;
  std::atomic<int> park_requests_{0};
  bool parked_ = false;
  std::mutex mu_;
  std::multimap<Clock::time_point, std::function<void()>> timers_;
  std::vector<std::shared_ptr<Endpoint>> live_, graveyard_;
  std::thread thread_;
  std::thread::id thread_id_;
  std::vector<Context*> cm_ctx_;  // by device index
  std::vector<Pd*> cm_pd_;
  std::vector<Retired> retired_;
};

// Starts the control channel if SOFTRDMA_CONTROL names a path (control.cc);
// called once, by the Fabric's constructor.
void startControl(Fabric& f);
// Watches the links of the interfaces SOFTRDMA_DEVICES names, if any
// (link_watch.cc); called once, by the Fabric's constructor.
void startLinkWatch(Fabric& f);

}  // namespace softrdma
