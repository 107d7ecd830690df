// ibv_rereg_mr, as rxe does it (the kernel's rxe_rereg_user_mr) for new
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

#include "internal.h"

using namespace softrdma;

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
