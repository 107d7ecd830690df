// Verbs: protection domains, and the process's table of them by handle
// (for ibv_import_pd, import.cc).
#include <atomic>
#include <cerrno>
#include <mutex>
#include <unordered_map>

#include "base.h"
#include "device.h"
#include "fork_hooks.h"
#include "pd_mr.h"

namespace softrdma {

namespace {

std::mutex& pdMutex() {
  static auto* m = new std::mutex();
  return *m;
}

std::unordered_map<uint32_t, Pd*>& pdsByHandle() {  // under pdMutex()
  static auto* t = new std::unordered_map<uint32_t, Pd*>();
  return *t;
}

}  // namespace

void forkPds(ForkStep s) {
  if (s == ForkStep::Prepare)
    pdMutex().lock();
  else
    pdMutex().unlock();
}

void notePd(Pd* p) {
  std::lock_guard lk(pdMutex());
  pdsByHandle()[p->pd.handle] = p;
}

void forgetPd(Pd* p) {
  std::lock_guard lk(pdMutex());
  auto it = pdsByHandle().find(p->pd.handle);
  if (it != pdsByHandle().end() && it->second == p) pdsByHandle().erase(it);
}

std::unique_lock<std::mutex> lockPdTable() {
  return std::unique_lock(pdMutex());
}

Pd* findPdLocked(uint32_t handle) {
  auto it = pdsByHandle().find(handle);
  return it == pdsByHandle().end() ? nullptr : it->second;
}

}  // namespace softrdma

using namespace softrdma;

SOFTRDMA_API ibv_pd* ibv_alloc_pd(ibv_context* ctx) {
  if (ctx == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  if (contextDead(ctx)) {
    errno = EIO;
    return nullptr;
  }
  static std::atomic<uint32_t> handles{1};
  auto* p = new Pd();
  p->pd.context = ctx;
  p->pd.handle = handles++;
  toContext(ctx)->users++;
  notePd(p);
  return &p->pd;
}

SOFTRDMA_API int ibv_dealloc_pd(ibv_pd* pd) {
  if (pd == nullptr) return EINVAL;
  auto* p = reinterpret_cast<Pd*>(pd);
  if (p->base != nullptr) return EINVAL;  // imported: ibv_unimport_pd (import.cc)
  if (p->users.load() != 0 || p->views.load() != 0) return EBUSY;
  forgetPd(p);
  toContext(pd->context)->users--;
  delete p;
  return 0;
}
