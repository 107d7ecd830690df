// The Fabric's librdmacm context: the per-device context and default PD
// that rdma_cm ids use, opened on first use; a context whose device was
// removed is retired (closed once no id uses it) and a new one opened.
#include <mutex>

#include "device.h"
#include "fabric.h"
#include "pd_mr.h"

namespace softrdma {

Context* Fabric::cmContext() {
  std::lock_guard lk(mu_);
  return cmContextLocked();
}

Context* Fabric::cmContextLocked() {
  if (cm_ctx_ != nullptr && cm_ctx_->dead) {
    retired_.push_back({cm_ctx_, cm_pd_});
    cm_ctx_ = nullptr;
    cm_pd_ = nullptr;
  }
  if (cm_ctx_ == nullptr) {
    ibv_context* c = ibv_open_device(currentDevice());
    if (c == nullptr) return nullptr;  // no device
    ibv_pd* pd = ibv_alloc_pd(c);
    if (pd == nullptr) {  // removed meanwhile
      ibv_close_device(c);
      return nullptr;
    }
    cm_ctx_ = toContext(c);
    cm_pd_ = reinterpret_cast<Pd*>(pd);
  }
  return cm_ctx_;
}

Pd* Fabric::cmPd() {
  std::lock_guard lk(mu_);
  return cmContextLocked() != nullptr ? cm_pd_ : nullptr;
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
