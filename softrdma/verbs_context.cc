// Verbs: the device list and a context's opening and closing. openContext
// fills in the context's operations from the modules that implement them
// (context_ops.h), so this file sits above the CQ, QP and memory-window code.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "base.h"
#include "context_ops.h"
#include "device.h"
#include "fabric.h"

using namespace softrdma;

SOFTRDMA_API ibv_device** ibv_get_device_list(int* num) {
  Fabric::get();  // start the progress thread (and the control channel)
  const int n = deviceCount();
  auto** list = static_cast<ibv_device**>(calloc(n + 1, sizeof(ibv_device*)));
  if (list == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  int listed = 0;
  for (int i = 0; i < n; i++) {
    ibv_device* d = currentDevice(i);  // nullptr while the device is absent: not listed
    if (d != nullptr) list[listed++] = d;
  }
  if (num != nullptr) *num = listed;
  return list;
}

SOFTRDMA_API void ibv_free_device_list(ibv_device** list) {
  free(list);
}

SOFTRDMA_API const char* ibv_get_device_name(ibv_device* dev) {
  return dev != nullptr ? dev->name : nullptr;
}

SOFTRDMA_API __be64 ibv_get_device_guid(ibv_device* dev) {
  return htobe64(nodeGuid(dev != nullptr ? deviceIndex(dev) : 0));
}

SOFTRDMA_API int ibv_get_device_index(ibv_device* dev) {
  return isCurrentDevice(dev) ? deviceIndex(dev) : -1;
}

SOFTRDMA_API ibv_context* ibv_open_device(ibv_device* dev) {
  if (!isCurrentDevice(dev)) {
    errno = ENODEV;
    return nullptr;
  }
  return openContext(dev, -1);
}

ibv_context* softrdma::openContext(ibv_device* dev, int cmd_fd) {
  auto* c = new Context();
  memset(&c->vctx, 0, sizeof c->vctx);
  c->vctx.sz = sizeof(verbs_context);
  c->vctx.query_port = queryPortOp;
  c->vctx.query_device_ex = queryDeviceExOp;
  c->vctx.create_cq_ex = createCqExOp;
  c->vctx.create_qp_ex = createQpExOp;
  ibv_context* ctx = c->ctx();
  ctx->device = dev;
  ctx->abi_compat = __VERBS_ABI_IS_EXTENDED;
  ctx->num_comp_vectors = 1;
  // The uverbs file's stand-in: a real fd of the context's own, which
  // programs may dup or poll, and which names the context to
  // ibv_import_device (import.cc): an unbound Unix socket, whose inode is
  // its own.
  const bool imported = cmd_fd >= 0;
  ctx->cmd_fd = imported ? cmd_fd : socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (ctx->cmd_fd < 0) {
    delete c;
    return nullptr;
  }
  ctx->ops.poll_cq = pollCqOp;
  ctx->ops.req_notify_cq = reqNotifyCqOp;
  ctx->ops.post_send = postSendOp;
  ctx->ops.post_recv = postRecvOp;
  ctx->ops.post_srq_recv = postSrqRecvOp;
  setMwOps(ctx);
  pthread_mutex_init(&ctx->mutex, nullptr);
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) {
    if (!imported) close(ctx->cmd_fd);
    delete c;
    return nullptr;
  }
  fcntl(p[1], F_SETFL, O_NONBLOCK);
  ctx->async_fd = p[0];
  c->async_wfd = p[1];
  Fabric::get();  // start the progress thread
  if (addContext(dev, c)) return ctx;
  close(p[0]);  // removed meanwhile
  close(p[1]);
  if (!imported) close(ctx->cmd_fd);
  pthread_mutex_destroy(&ctx->mutex);
  delete c;
  errno = ENODEV;
  return nullptr;
}

SOFTRDMA_API int ibv_close_device(ibv_context* ctx) {
  if (ctx == nullptr) return setErr(EINVAL);
  Context* c = toContext(ctx);
  if (!removeContext(c)) return 0;  // kept: objects remain on it
  close(ctx->async_fd);
  close(c->async_wfd);
  close(ctx->cmd_fd);
  pthread_mutex_destroy(&ctx->mutex);
  delete c;
  return 0;
}
