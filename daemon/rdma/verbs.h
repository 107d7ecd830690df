// Owning handles for rdma-core objects: one std::unique_ptr alias with a
// deleter per object kind. Declare members parent-first (device list,
// context, event channel, protection domain, completion channel, CQ, memory
// regions, QP, id) so the compiler destroys them child-first: teardown order
// by construction.
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <cerrno>
#include <cstdint>
#include <memory>
#include <string>
#include <system_error>

#include "common/status.h"

namespace rdmamsg::rdma {

struct DeviceListDeleter {
  void operator()(ibv_device** l) const { ibv_free_device_list(l); }
};
struct ContextDeleter {
  void operator()(ibv_context* c) const { ibv_close_device(c); }
};
struct EventChannelDeleter {
  void operator()(rdma_event_channel* c) const { rdma_destroy_event_channel(c); }
};
struct PdDeleter {
  void operator()(ibv_pd* p) const { ibv_dealloc_pd(p); }
};
struct CompChannelDeleter {
  void operator()(ibv_comp_channel* c) const { ibv_destroy_comp_channel(c); }
};
struct CqDeleter {
  void operator()(ibv_cq* c) const { ibv_destroy_cq(c); }
};
struct MrDeleter {
  void operator()(ibv_mr* m) const { ibv_dereg_mr(m); }
};

// An rdma_cm id, and the QP created on it with rdma_create_qp (destroyed
// with rdma_destroy_qp; the id outlives it). Declare the id first.
struct CmIdDeleter {
  void operator()(rdma_cm_id* id) const { rdma_destroy_id(id); }
};
struct CmQpDeleter {
  void operator()(rdma_cm_id* id) const { rdma_destroy_qp(id); }
};

// What ibv_get_device_list returns (the array; its devices belong to libibverbs).
using DeviceListPtr = std::unique_ptr<ibv_device*[], DeviceListDeleter>;
using ContextPtr = std::unique_ptr<ibv_context, ContextDeleter>;
using EventChannelPtr = std::unique_ptr<rdma_event_channel, EventChannelDeleter>;
using PdPtr = std::unique_ptr<ibv_pd, PdDeleter>;
using CompChannelPtr = std::unique_ptr<ibv_comp_channel, CompChannelDeleter>;
using CqPtr = std::unique_ptr<ibv_cq, CqDeleter>;
using MrPtr = std::unique_ptr<ibv_mr, MrDeleter>;
using CmIdPtr = std::unique_ptr<rdma_cm_id, CmIdDeleter>;
using CmQpPtr = std::unique_ptr<rdma_cm_id, CmQpDeleter>;  // holds the id whose QP it owns

// io_error for a call that failed with `err` (an errno value): "<call>:
// <strerror>".
inline Status callFailed(const char* call, int err) {
  return Status(Errc::io_error,
                std::string(call) + ": " + std::error_code(err, std::generic_category()).message());
}

// A new rdma_cm id on `channel` (RDMA_PS_TCP); io_error naming
// rdma_create_id when it fails.
inline Result<CmIdPtr> createCmId(rdma_event_channel* channel, void* context = nullptr) {
  rdma_cm_id* id = nullptr;
  if (rdma_create_id(channel, &id, context, RDMA_PS_TCP) != 0)
    return callFailed("rdma_create_id", errno);
  return CmIdPtr(id);
}

// Sets the ToS byte of `id`'s connections (rdma_set_option,
// RDMA_OPTION_ID_TOS): before resolving an address, or on a listening id
// for the connections it accepts. io_error naming the call when refused.
inline Status setTos(rdma_cm_id* id, uint8_t tos) {
  if (rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, sizeof tos) != 0)
    return callFailed("rdma_set_option(RDMA_OPTION_ID_TOS)", errno);
  return Status();
}

// Makes an rdma-core fd nonblocking (channels are blocking by default);
// io_error naming fcntl when it cannot.
Status setNonBlocking(int fd);

}  // namespace rdmamsg::rdma
