// Owning handles for rdma-core objects: one std::unique_ptr alias with a
// deleter per object kind. Declare members parent-first (event channel,
// protection domain, completion channel, CQ, memory regions, QP, id) so the
// compiler destroys them child-first: teardown order by construction.
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <memory>

namespace rdmamsg::rdma {

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

using EventChannelPtr = std::unique_ptr<rdma_event_channel, EventChannelDeleter>;
using PdPtr = std::unique_ptr<ibv_pd, PdDeleter>;
using CompChannelPtr = std::unique_ptr<ibv_comp_channel, CompChannelDeleter>;
using CqPtr = std::unique_ptr<ibv_cq, CqDeleter>;
using MrPtr = std::unique_ptr<ibv_mr, MrDeleter>;
using CmIdPtr = std::unique_ptr<rdma_cm_id, CmIdDeleter>;
using CmQpPtr = std::unique_ptr<rdma_cm_id, CmQpDeleter>;  // holds the id whose QP it owns

// Makes an rdma-core fd nonblocking (channels are blocking by default).
bool setNonBlocking(int fd);

}  // namespace rdmamsg::rdma
