// The Fabric's librdmacm contexts: the per-device context and default PD
// that rdma_cm ids use, opened on first use; a context whose device was
// removed is retired (closed once no id uses it) and a new one opened.
#include <mutex>

#include "device.h"
#include "fabric.h"
#include "pd_mr.h"

namespace softrdma {

Context* Fabric::cmContext(int index) {
  std::lock_guard lk(mu_);
  return cmContextLocked(index);
}

Context* Fabric::cmContextLocked(int index) {
  if (index < 0 || index >= deviceCount()) return nullptr;
  if (cm_ctx_.size() != static_cast<size_t>(deviceCount())) {
    cm_ctx_.resize(deviceCount(), nullptr);
    cm_pd_.resize(deviceCount(), nullptr);
  }
  Context*& ctx = cm_ctx_[index];
  Pd*& pd = cm_pd_[index];
  if (ctx != nullptr && ctx->dead) {
    retired_.push_back({ctx, pd});
    ctx = nullptr;
    pd = nullptr;
  }
  if (ctx == nullptr) {
    ibv_context* c = ibv_open_device(currentDevice(index));
    if (c == nullptr) return nullptr;  // no device
    ibv_pd* p = ibv_alloc_pd(c);
    if (p == nullptr) {  // removed meanwhile
      ibv_close_device(c);
      return nullptr;
    }
    ctx = toContext(c);
    pd = reinterpret_cast<Pd*>(p);
  }
  return ctx;
}

Pd* Fabric::cmPd(int index) {
  std::lock_guard lk(mu_);
  return cmContextLocked(index) != nullptr ? cm_pd_[index] : nullptr;
}

std::vector<Fabric::Retired> Fabric::takeRetired() {
  std::lock_guard lk(mu_);
  std::vector<Retired> r;
  r.swap(retired_);
  return r;
}

void Fabric::keepRetired(const std::vector<Retired>& r) {
  std::lock_guard lk(mu_);
  retired_.insert(retired_.end(), r.begin(), r.end());
}

}  // namespace softrdma
