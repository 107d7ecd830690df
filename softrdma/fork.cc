// fork(): what a process that used softrdma, and its child, keep.
//
// The semantics are rdma-core's with fork support enabled (ibv_fork_init,
// RDMAV_FORK_SAFE, or any kernel since 5.13, where ibv_is_fork_initialized
// answers IBV_FORK_UNNEEDED): the parent goes on as if nothing happened; the
// child cannot use what the parent created (its QPs, connections, rdma_cm
// ids) but opens the device and creates, connects and uses objects of its
// own.
//
// Before fork (prepare): the progress thread is asked to stop between two
// turns, where it holds no lock, and every process-wide lock is taken in the
// lock order, so that the child inherits consistent tables.
// In the parent: the locks are released and the progress thread goes on.
// In the child, which has no progress thread: the inherited Fabric is
// abandoned. The child closes its copies of the Fabric's epoll and wake
// descriptors and of every socket, and nothing else: an epoll_ctl on the
// shared epoll instance, or a shutdown of a shared socket, would change the
// parent's. The tables forget the parent's objects, which are leaked rather
// than destroyed (the program may still hold pointers to them). The child's
// next softrdma call builds a new Fabric with its own progress thread.
#include <pthread.h>
#include <unistd.h>

#include "base.h"
#include "fabric.h"
#include "fork_hooks.h"

namespace softrdma {

void Fabric::park() {
  std::unique_lock lk(park_mu_);
  parked_ = true;
  park_cv_.notify_all();
  park_cv_.wait(lk, [&] { return park_requests_.load() == 0; });
  parked_ = false;
}

void Fabric::holdProgress(bool hold) {
  if (onProgressThread()) return;
  if (hold) {
    {
      std::lock_guard lk(park_mu_);
      park_requests_++;
    }
    wake();
    std::unique_lock lk(park_mu_);
    park_cv_.wait(lk, [&] { return parked_; });
    return;
  }
  {
    std::lock_guard lk(park_mu_);
    if (park_requests_.load() > 0) park_requests_--;
  }
  park_cv_.notify_all();
}

void Fabric::forkPrepare() {
  instance_mu_.lock();
  Fabric* f = instance_.load();
  // No Fabric yet: the process has no softrdma object, nothing to protect.
  if (f == nullptr) return;
  if (!f->onProgressThread()) {
    {
      std::lock_guard lk(f->park_mu_);
      f->park_requests_++;
    }
    f->wake();
    std::unique_lock lk(f->park_mu_);
    f->park_cv_.wait(lk, [&] { return f->parked_; });
  }
  // The lock order (base.h): cm_mu, then the manual-QP listeners (which
  // call add()), then the Fabric's lock, the device's, and the leaves.
  f->cm_mu.lock();
  forkManual(ForkStep::Prepare);
  f->mu_.lock();
  forkDevice(ForkStep::Prepare);
  forkMrs(ForkStep::Prepare);
  forkQps(ForkStep::Prepare);
  forkSrqs(ForkStep::Prepare);
  forkCqs(ForkStep::Prepare);
  forkTransport(ForkStep::Prepare);
  forkEndpoints(ForkStep::Prepare);
  forkWindows(ForkStep::Prepare);
}

void Fabric::forkParent() {
  Fabric* f = instance_.load();
  if (f != nullptr) {
    forkWindows(ForkStep::Parent);
    forkEndpoints(ForkStep::Parent);
    forkTransport(ForkStep::Parent);
    forkCqs(ForkStep::Parent);
    forkSrqs(ForkStep::Parent);
    forkQps(ForkStep::Parent);
    forkMrs(ForkStep::Parent);
    forkDevice(ForkStep::Parent);
    f->mu_.unlock();
    forkManual(ForkStep::Parent);
    f->cm_mu.unlock();
    if (!f->onProgressThread()) {
      {
        std::lock_guard lk(f->park_mu_);
        f->park_requests_--;
      }
      f->park_cv_.notify_all();
    }
  }
  instance_mu_.unlock();
}

void Fabric::forkChild() {
  Fabric* f = instance_.load();
  if (f != nullptr) {
    forkWindows(ForkStep::Child);
    forkEndpoints(ForkStep::Child);
    forkTransport(ForkStep::Child);
    forkCqs(ForkStep::Child);
    forkSrqs(ForkStep::Child);
    forkQps(ForkStep::Child);
    forkMrs(ForkStep::Child);
    forkDevice(ForkStep::Child);
    forkCm(ForkStep::Child);
    forkCounters(ForkStep::Child);
    f->mu_.unlock();
    forkManual(ForkStep::Child);
    f->cm_mu.unlock();
    close(f->epfd_);
    close(f->wakefd_);
    close(f->timerfd_);
    f->epfd_ = f->wakefd_ = f->timerfd_ = -1;
    abandonedInChild().push_back(f);  // never run again here, nor freed
    instance_.store(nullptr);
  }
  instance_mu_.unlock();
}

namespace {

__attribute__((constructor)) void registerForkHandlers() {
  pthread_atfork([] { Fabric::forkPrepare(); }, [] { Fabric::forkParent(); },
                 [] { Fabric::forkChild(); });
}

}  // namespace

}  // namespace softrdma

using namespace softrdma;

// Fork support is always on (as on kernels since 5.13): nothing to enable.
SOFTRDMA_API int ibv_fork_init(void) {
  return 0;
}

SOFTRDMA_API ibv_fork_status ibv_is_fork_initialized(void) {
  return IBV_FORK_UNNEEDED;
}

SOFTRDMA_API int softrdma_hold_progress(int hold) {
  Fabric::get().holdProgress(hold != 0);
  return 0;
}
