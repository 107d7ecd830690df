// Sharing a context's objects (ibv_import_device.3, ibv_import_pd.3,
// ibv_import_mr.3), within a process.
//
// ibv_import_device takes a descriptor of a context's command file (its
// cmd_fd, or a dup of it) and returns a new context on the same device that
// shares the first one's objects: the descriptor names its context through
// its inode (an unbound Unix socket's, verbs_context.cc), and the new context
// owns the descriptor (ibv_close_device closes it). Through such a context,
// ibv_import_pd and ibv_import_mr give a PD or an MR of the original context
// by its handle: a new ibv_pd or ibv_mr (of the importing context) that
// stands for the same object. A QP created on an imported PD is in that PD;
// an imported MR has the original's keys, length and access, and no address
// (the kernel does not tell it). ibv_unimport_pd and ibv_unimport_mr free the
// view, not the object.
//
// Differences from the kernel, where an imported object is the same kernel
// object as the original: ibv_dealloc_pd and ibv_dereg_mr through a view
// fail with EINVAL (unimport it; the original's owner destroys the object),
// and the original cannot be destroyed while views of it exist (EBUSY).
// A descriptor that is no command file of this process's contexts (one
// passed from another process, say) is refused with EOPNOTSUPP: softrdma
// shares objects within a process only.
#include <sys/stat.h>

#include <cerrno>

#include "base.h"
#include "context_ops.h"
#include "device.h"
#include "pd_mr.h"

namespace softrdma {

namespace {

// The context whose objects `c` shares: its origin, or itself.
Context* originOf(ibv_context* c) {
  Context* x = toContext(c);
  return x->origin != nullptr ? x->origin : x;
}

}  // namespace

}  // namespace softrdma

using namespace softrdma;

SOFTRDMA_API ibv_context* ibv_import_device(int cmd_fd) {
  struct stat st {};
  if (cmd_fd < 0 || fstat(cmd_fd, &st) != 0) {
    errno = EBADF;
    return nullptr;
  }
  Context* from = findContextByFd(cmd_fd);
  if (from == nullptr || from->dead) {
    errno = from == nullptr ? EOPNOTSUPP : EIO;
    return nullptr;
  }
  ibv_context* ctx = openContext(from->ctx()->device, cmd_fd);
  if (ctx == nullptr) return nullptr;
  toContext(ctx)->origin = from;
  return ctx;
}

SOFTRDMA_API ibv_pd* ibv_import_pd(ibv_context* ctx, uint32_t handle) {
  if (ctx == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  auto lk = lockPdTable();
  Pd* base = findPdLocked(handle);
  if (base == nullptr || originOf(base->pd.context) != originOf(ctx)) {
    errno = EINVAL;  // no such PD in the context's file
    return nullptr;
  }
  auto* p = new Pd();
  p->pd.context = ctx;
  p->pd.handle = handle;
  p->base = base;
  base->views++;
  return &p->pd;
}

SOFTRDMA_API void ibv_unimport_pd(ibv_pd* pd) {
  if (pd == nullptr) return;
  auto* p = reinterpret_cast<Pd*>(pd);
  if (p->base == nullptr) return;  // not imported: nothing to undo
  p->base->views--;
  delete p;
}

SOFTRDMA_API ibv_mr* ibv_import_mr(ibv_pd* pd, uint32_t handle) {
  if (pd == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  Mr* base = findMrByKey(handle);  // an MR's handle is its key
  if (base == nullptr || base->shown != nullptr ||
      originOf(base->mr.context) != originOf(pd->context)) {
    errno = EINVAL;
    return nullptr;
  }
  auto* m = new Mr();
  m->shown = base;
  m->pd = base->pd.load();
  m->access = base->access.load();
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = nullptr;
  m->mr.length = base->mr.length;
  m->mr.handle = base->mr.handle;
  m->mr.lkey = base->mr.lkey;
  m->mr.rkey = base->mr.rkey;
  base->views++;
  return &m->mr;
}

SOFTRDMA_API void ibv_unimport_mr(ibv_mr* mr) {
  if (mr == nullptr) return;
  auto* m = reinterpret_cast<Mr*>(mr);
  if (m->shown == nullptr) return;
  m->shown->views--;
  delete m;
}
