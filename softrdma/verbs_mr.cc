// Verbs: memory regions — the process-wide key table (lkey == rkey ==
// index << 8 | generation, registry.h), registration and deregistration —
// and ibv_rereg_mr.
//
// ibv_rereg_mr is done as rxe does it (the kernel's rxe_rereg_user_mr) for new
// access flags and a new PD: they govern the next request, the keys
// unchanged. A new translation (IBV_REREG_MR_CHANGE_TRANSLATION) is refused
// with EOPNOTSUPP, as rxe refuses it. The input checks are libibverbs' and
// the kernel's (EINVAL).
//
// The posting thread and the responder check an MR's access and PD on every
// request without a lock (Mr::access and Mr::pd are atomic): a request
// racing the re-registration sees the old or the new values, and every later
// one the new.
#include <cerrno>

#include "base.h"
#include "device.h"
#include "fork_hooks.h"
#include "pd_mr.h"
#include "registry.h"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

namespace softrdma {

namespace {

Registry<Mr>& mrs() {
  static auto* r = new Registry<Mr>();
  return *r;
}

}  // namespace

// fork: the key table's lock, right after the device's (fork.cc).
void forkMrs(ForkStep s) {
  if (s == ForkStep::Prepare)
    mrs().lockForFork();
  else
    mrs().unlockAfterFork();
}

Mr* findMrByKey(uint32_t key) {
  return mrs().find(key >> 8, key);
}

bool Mr::covers(uint64_t addr, uint64_t len) const {
  uint64_t start = reinterpret_cast<uint64_t>(mr.addr);
  return addr >= start && len <= mr.length && addr - start <= mr.length - len;
}

}  // namespace softrdma

using namespace softrdma;

static ibv_mr* regMr(ibv_pd* pd, void* addr, size_t len, uint64_t iova, unsigned access) {
  if (pd == nullptr || (addr == nullptr && len != 0)) {
    errno = EINVAL;
    return nullptr;
  }
  if (contextDead(pd->context)) {
    errno = EIO;
    return nullptr;
  }
  // Remote write or atomic access requires local write (ibv_reg_mr.3).
  if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
      !(access & IBV_ACCESS_LOCAL_WRITE)) {
    errno = EINVAL;
    return nullptr;
  }
  auto* m = new Mr();
  m->pd = toPd(pd);
  m->access = static_cast<int>(access);
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = addr;
  m->mr.length = len;
  (void)iova;  // remote addresses are virtual addresses (iova == addr)
  uint32_t key = mrs().insert(m);
  if (key == 0) {
    delete m;
    errno = ENOMEM;
    return nullptr;
  }
  m->mr.handle = key;
  m->mr.lkey = key;
  m->mr.rkey = key;
  m->pd.load()->users++;
  return &m->mr;
}

SOFTRDMA_API ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t len, int access) {
  return regMr(pd, addr, len, reinterpret_cast<uint64_t>(addr), static_cast<unsigned>(access));
}

SOFTRDMA_API ibv_mr* ibv_reg_mr_iova(ibv_pd* pd, void* addr, size_t len, uint64_t iova,
                                     int access) {
  if (iova != reinterpret_cast<uint64_t>(addr)) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  return regMr(pd, addr, len, iova, static_cast<unsigned>(access));
}

SOFTRDMA_API ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t len, uint64_t iova,
                                      unsigned access) {
  if (iova != reinterpret_cast<uint64_t>(addr)) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  return regMr(pd, addr, len, iova, access);
}

SOFTRDMA_API int ibv_dereg_mr(ibv_mr* mr) {
  if (mr == nullptr) return EINVAL;
  auto* m = reinterpret_cast<Mr*>(mr);
  if (m->mws.load() > 0) return EINVAL;    // windows are bound to it (rxe, IBA 10.6.7.2.6)
  if (m->shown != nullptr) return EINVAL;  // imported: ibv_unimport_mr (import.cc)
  if (m->views.load() > 0) return EBUSY;
  mrs().erase(mr->lkey >> 8, m);
  m->pd.load()->users--;
  delete m;
  return 0;
}

namespace {

constexpr int kKnownRereg =
    IBV_REREG_MR_CHANGE_ACCESS | IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_TRANSLATION;

int refuse(int err, int code) {
  errno = err;
  return code;
}

}  // namespace

SOFTRDMA_API int ibv_rereg_mr(ibv_mr* mr, int flags, ibv_pd* pd, void* addr, size_t length,
                              int access) {
  if (mr == nullptr || flags == 0 || (flags & ~kKnownRereg))
    return refuse(EINVAL, IBV_REREG_MR_ERR_INPUT);
  if (reinterpret_cast<Mr*>(mr)->shown != nullptr)  // an imported MR (import.cc)
    return refuse(EINVAL, IBV_REREG_MR_ERR_INPUT);
  const bool translation = flags & IBV_REREG_MR_CHANGE_TRANSLATION;
  if (translation ? (addr == nullptr || length == 0) : (addr != nullptr || length != 0))
    return refuse(EINVAL, IBV_REREG_MR_ERR_INPUT);
  if (access != 0 && !(flags & IBV_REREG_MR_CHANGE_ACCESS))
    return refuse(EINVAL, IBV_REREG_MR_ERR_INPUT);
  if ((flags & IBV_REREG_MR_CHANGE_PD) && (pd == nullptr || pd->context != mr->context))
    return refuse(EINVAL, IBV_REREG_MR_ERR_INPUT);
  if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) return refuse(EOPNOTSUPP, IBV_REREG_MR_ERR_CMD);
  // Remote write or atomic access requires local write (ibv_reg_mr.3).
  if ((flags & IBV_REREG_MR_CHANGE_ACCESS) &&
      (access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
      !(access & IBV_ACCESS_LOCAL_WRITE))
    return refuse(EINVAL, IBV_REREG_MR_ERR_CMD);
  if (contextDead(mr->context)) return refuse(EIO, IBV_REREG_MR_ERR_CMD);
  auto* m = reinterpret_cast<Mr*>(mr);
  if (flags & IBV_REREG_MR_CHANGE_PD) {
    auto* to = toPd(pd);
    to->users++;
    m->pd.exchange(to)->users--;
    mr->pd = pd;  // as libibverbs does on success
  }
  if (flags & IBV_REREG_MR_CHANGE_ACCESS) m->access = access;
  return 0;
}
