// Helpers shared by softrdma's rdma_cm files, lowest first: cm_id.cc (the
// ids' table, addresses, messages, states, queued events), cm_qp_attr.cc
// (the QP attributes of an id), cm_ud.cc (SIDR), cm.cc (the connection
// engine), cm_events.cc (channels, getting events, synchronous waits), then
// the public calls: cm_addr.cc, cm_api.cc, cm_multicast.cc and, on top,
// cm_sync.cc. A file calls only those listed before it. Callers hold
// Fabric::cm_mu unless a comment says otherwise.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>

#include "base.h"
#include "cm_id.h"
#include "conn.h"
#include "fabric.h"
#include "wire.h"

namespace softrdma {

constexpr int kRejInvalidServiceId = 8;  // IB_CM_REJ_INVALID_SERVICE_ID
constexpr int kRejConsumerDefined = 28;  // IB_CM_REJ_CONSUMER_DEFINED

std::unordered_map<rdma_cm_id*, std::shared_ptr<CmId>>& idTable();
std::shared_ptr<CmId> idRef(rdma_cm_id* id);
// Validates an id argument (cm_mu held): a pointer softrdma handed out and
// that has not been destroyed.
std::shared_ptr<CmId> liveId(rdma_cm_id* id);
// Calls on an id after its DEVICE_REMOVAL: the kernel has closed its side
// of the id (ucma_close_id), so every command fails with ENXIO.
bool removed(const std::shared_ptr<CmId>& id);
CmChannel* newChannel(bool sync);  // no lock needed
void freeChannel(CmChannel* ch);
CmChannel* toChannel(rdma_event_channel* ch);
void setNoDelay(int fd);
// The IP TOS (IPv6 traffic class) of a connection's socket: RDMA_OPTION_ID_TOS.
void setTos(int fd, int family, uint8_t tos);
socklen_t addrLen(const sockaddr* a);
// An IPv4-mapped IPv6 address as the IPv4 address it maps.
void unmapV4(sockaddr_storage& a);
void setAddrs(CmId* id, const sockaddr* src, const sockaddr* dst);
// Binds `id` to the device whose interface holds `src` (the kernel's
// cma_acquire_dev_by_src_ip): false if none does, or it is absent.
bool bindToDevice(CmId* id, const sockaddr* src);
// The interface under the device an id was bound to and its hardware
// address then, as the kernel records them in the id's rdma_dev_addr
// (bound_dev_if and src_dev_addr, rdma_copy_src_l2_addr): what ADDR_CHANGE
// compares with an interface's new address (changeCmAddress, cm.cc). Kept
// by bindToDevice with SOFTRDMA_DEVICES only; an id's entry goes with it
// from idTable.
struct BoundHw {
  unsigned ifindex = 0;
  std::string hw;
};
std::unordered_map<const CmId*, BoundHw>& boundHwTable();
CmMessage makeMessage(uint32_t qpn, const rdma_conn_param* p);
void sendCm(Conn& c, FrameType t, const CmMessage* m);
void scheduleTimewait(const std::shared_ptr<CmId>& id);
void closeConn(const std::shared_ptr<Conn>& c);
void qpToError(CmId* id);
void attachQp(CmId* id);
void admitDeferred(CmId* listener);
void fillConnParam(rdma_conn_param& p, const CmMessage& m);
std::shared_ptr<Endpoint> makeListener(int fd, const std::shared_ptr<CmId>& id);
void listenerStart(CmId* id);
void onReq(const std::shared_ptr<Conn>& c, const CmMessage& m);

// UD ids (RDMA_PS_UDP, RDMA_PS_IPOIB; cm_ud.cc, cm_multicast.cc): SIDR instead of a
// connection, and multicast.
constexpr size_t kSidrReqPrivateData = 180;  // IB CM SIDR REQ, after the CMA header
constexpr size_t kSidrRepPrivateData = 136;  // IB CM SIDR REP
inline bool isUdId(const CmId* id) {
  return id->id.qp_type == IBV_QPT_UD;
}
// The attributes rdma_cm gives an id's QP for a state (cm_qp_attr.cc): an
// errno value.
int initQpAttr(rdma_cm_id* rid, ibv_qp_attr* a, int* mask);
int udInitQpAttr(CmId* id, ibv_qp_attr* a, int* mask);
// The address handle of the id's route (ib_init_ah_attr_from_path).
ibv_ah_attr routeAh(CmId* id);
int udAccept(const std::shared_ptr<CmId>& id, const rdma_conn_param* param);
int udReject(const std::shared_ptr<CmId>& id, const void* pdata, uint8_t len);
void onSidrRep(const std::shared_ptr<CmId>& id, const std::shared_ptr<Conn>& c, FrameType t,
               const CmMessage& m);
// A MULTICAST_JOIN event handed out: librdmacm attaches the id's QP then.
void onJoinEvent(CmEvent* e);

// Synchronous ids: wait for the next event of `id` (cm_mu NOT held), as
// librdmacm's ucma_complete does; returns 0 or -1 with errno.
int syncComplete(rdma_cm_id* id);

}  // namespace softrdma
