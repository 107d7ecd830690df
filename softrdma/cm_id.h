// rdma_cm's objects: event channels, events, identifiers and their states,
// and the calls the transport makes into the connection manager (cm.cc; cm_internal.h has the
// helpers the rdma_cm files share).
#pragma once

#include <rdma/rdma_cma.h>
#include <sys/socket.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "base.h"
#include "wire.h"

namespace softrdma {

struct Endpoint;

struct CmEvent;
struct CmChannel {
  rdma_event_channel ch;       // fd: an eventfd in semaphore mode, one count per event
  bool sync = false;           // private channel of a synchronous id
  std::deque<CmEvent*> queue;  // one eventfd count per entry (cm_mu)
  // softrdma_hold_cm_events: counts not yet written to the fd (cm_mu).
  bool held = false;
  uint64_t held_tokens = 0;
};
// One more event on `ch` (cm_mu held): a count on its fd, unless held.
void signalChannel(CmChannel* ch);

enum class CmState {
  Idle,
  AddrBound,
  AddrQuery,
  AddrResolved,
  RouteQuery,
  RouteResolved,
  Listen,
  Connect,   // active: REQ queued/sent
  ReqRcvd,   // passive: CONNECT_REQUEST delivered or queued
  Accepted,  // passive: REP sent, waiting for RTU
  RepRcvd,   // active: REP received, ESTABLISHED/CONNECT_RESPONSE pending
  Established,
  DisconnectSent,  // DREQ sent, waiting for DREP
  DreqRcvd,        // DREQ received, application not yet disconnected
  Disconnected,
  DeviceRemoval,  // DEVICE_REMOVAL reported: no further events, calls fail
  Destroying,
};
const char* toString(CmState s);

struct CmEvent {
  rdma_cm_event ev{};
  uint8_t pdata[kAcceptPrivateData]{};
  std::shared_ptr<CmId> owner;    // whose events.reported/acked counts it
  std::shared_ptr<CmId> subject;  // ev.id (a new id for CONNECT_REQUEST)
  bool dead = false;
  bool rep = false;  // active REP: the QP transitions happen when it is gotten
};

struct CmId {
  rdma_cm_id id{};  // first: rdma_cm_id* and CmId* convert with reinterpret_cast
  std::weak_ptr<CmId> self;
  CmChannel* channel = nullptr;
  CmState state = CmState::Idle;
  bool sync = false;
  std::shared_ptr<Conn> conn;
  // The bound TCP socket (rdma_bind_addr), listening after rdma_listen.
  std::shared_ptr<Endpoint> listener;
  // A listener's backlog: connection requests delivered and not yet
  // accepted or rejected, and those waiting for room.
  struct Listening {
    int backlog = 0;
    int queued_requests = 0;
    std::vector<std::weak_ptr<Conn>> deferred;  // REQs over the backlog
  } listening;
  CmId* listen_parent = nullptr;  // passive ids: their listener
  // The connection's parameters, as the REQ/REP exchange settled them: the
  // peer's QP and retry counts, and the RDMA READ/atomic depths.
  struct ConnParams {
    uint8_t remote_rnr_retry = 7, remote_retry = 7;
    uint8_t responder_resources = 1, initiator_depth = 1;
    uint32_t remote_qpn = 0;
  } params;
  // rdma_set_option (cm_sync.cc). TOS: the connection's IP TOS / traffic
  // class and the path's traffic class. REUSEADDR and AFONLY: the port rules
  // among this process's ids (checkPort, cm_addr.cc) and IPV6_V6ONLY.
  struct Options {
    bool tos_set = false;
    uint8_t tos = 0;
    bool reuseaddr = false;
    int afonly = -1;           // -1: not set; at bind, 1 for IPv4, bindv6only for IPv6
    uint8_t ack_timeout = 14;  // RDMA_OPTION_ID_ACK_TIMEOUT; the kernel CM's default
  } opts;
  uint16_t bound_port = 0;  // host order; the port this id holds (0: none)
  // The QP side rdma_cm set up for the program: rdma_create_qp's QP and
  // CQs, and the QP attributes rdma_create_ep passive ids keep for
  // rdma_get_request.
  struct QpSetup {
    bool qp_created_by_cm = false;
    bool cm_created_cqs = false;
    std::unique_ptr<ibv_qp_init_attr> ep_qp_attr;
    ibv_pd* ep_pd = nullptr;
  } qp_setup;
  // Event accounting (cm_mu): events reported to and acked by the program,
  // and those not yet gotten.
  struct Events {
    uint32_t reported = 0, acked = 0;
    std::vector<CmEvent*> queued;
  } events;
  uint64_t timer_gen = 0;
  bool destroyed = false;
  ibv_sa_path_rec path{};
  bool owns_channel = false;  // a synchronous id's private channel
  bool peer_gone = false;
  // Multicast groups joined through this id (cm_multicast.cc).
  struct Join {
    sockaddr_storage addr;
    ibv_gid mgid;
    bool send_only;
  };
  std::vector<Join> joins;
};
CmId* toCmId(rdma_cm_id* id);

// Queue an event for `subject` (cm_mu held). `owner` defaults to subject.
void queueEvent(const std::shared_ptr<CmId>& subject, rdma_cm_event_type type, int status,
                const void* pdata = nullptr, size_t pdata_len = 0, size_t pdata_size = 0,
                const std::shared_ptr<CmId>& owner = nullptr, bool rep = false);
void setCmState(CmId* id, CmState s);
// Called by a connection's receive path (progress thread) for CM frames.
void onCmFrame(const std::shared_ptr<Conn>& c, FrameType t, const CmMessage& m);
void onConnLost(const std::shared_ptr<Conn>& c, const char* why);
void onConnConnected(const std::shared_ptr<Conn>& c, int err);
void onAcceptedConn(CmId* listener, const std::shared_ptr<Conn>& c);
int cmModifyQp(CmId* id, ibv_qp_state to);
// The device was removed: DEVICE_REMOVAL for every id bound to it (takes cm_mu).
void removeCmDevice();
// The hardware address of the interface with index `ifindex` changed to
// `hw` (link_watch.cc, progress thread): ADDR_CHANGE for every id bound
// over it whose recorded address differs (takes cm_mu).
void changeCmAddress(unsigned ifindex, const std::string& hw);

}  // namespace softrdma
