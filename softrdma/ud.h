// Unreliable datagram (UD) queue pairs, address handles and multicast: the
// pieces verbs_ud.cc (the datagram transport), ah.cc (address handles) and
// multicast.cc (groups) share with the rest of softrdma.
//
// The wire: every UD QP owns a Unix datagram socket at
// /dev/shm/softrdma-UID/ud-QPN, polled by the progress thread. A send is one
// datagram (UdHeader, then the payload) written to the socket of the
// destination QP, or, for a multicast GID, to the socket of every QP
// attached to the group (the group's directory /dev/shm/softrdma-UID/mc-MGID
// holds one entry per attached QP). docs/softrdma-reference.md, "UD queue pairs".
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "fabric.h"
#include "qp.h"
#include "wire.h"

namespace softrdma {

constexpr uint32_t kUdMtu = 4096;             // the port's MTU: the largest UD message
constexpr uint32_t kMulticastQpn = 0xFFFFFF;  // IB_MULTICAST_QPN
constexpr size_t kGrhBytes = 40;              // sizeof(struct ibv_grh)
constexpr uint32_t kUdMagic = 0x55524d53;     // "SMRU"

// One datagram's header, followed by `len` payload bytes. Host byte order
// (both ends are on this machine).
struct UdHeader {
  uint32_t magic;
  uint32_t dest_qpn;  // kMulticastQpn for a multicast GID
  uint32_t src_qpn;
  uint32_t qkey;
  uint32_t imm;  // network order, as posted
  uint32_t len;
  uint8_t with_imm;
  uint8_t solicited;
  uint8_t hop_limit;
  uint8_t traffic_class;
  uint32_t flow_label;
  uint64_t netns;  // the sender's network namespace (inode of /proc/self/ns/net)
  uint8_t sgid[16];
  uint8_t dgid[16];
  // UC: an RDMA WRITE's target.
  uint64_t raddr;
  uint32_t rkey;
  // The sending QP's type << 16 | the ibv_wr_opcode: a QP takes only
  // datagrams of its own type.
  uint32_t opcode;
};
static_assert(sizeof(UdHeader) == 88, "UD datagram header layout");
// UC messages travel as one datagram each, so they are limited by the
// socket buffer (rxe: 2^31 bytes).
constexpr uint32_t kUcMaxMessage = 256 * 1024;

// An address handle: what ibv_create_ah was given, checked.
struct Ah {
  ibv_ah ah;  // first: ibv_ah* and Ah* convert with reinterpret_cast
  ibv_ah_attr attr;
  in6_addr sgid;  // the source GID (attr.grh.sgid_index) at creation
  bool multicast = false;
  // A unicast GID of this host: datagrams to other GIDs go nowhere (every
  // UD QP softrdma can reach is on this machine).
  bool reachable = false;
};
// The live AH behind `ah`, or nullptr (a pointer softrdma did not hand out,
// or one destroyed).
Ah* liveAh(ibv_ah* ah);

// Whether a GID is a multicast address (RoCE: IPv6 ff00::/8 or an
// IPv4-mapped 224.0.0.0/4).
bool gidIsMulticast(const uint8_t* gid);
// The index of `gid` in the GID table of device `dev`'s port, or -1.
int gidIndex(const in6_addr& gid, int dev);
std::string shmDir();  // /dev/shm/softrdma-UID (created on first use)
uint64_t netnsId();    // this process's network namespace

// The per-QP state of a UD QP (Qp::ud): its socket and its groups.
struct UdState {
  std::shared_ptr<Endpoint> ep;  // the QP's socket, polled by the progress thread
  std::string path;
  // Held by a post from start to end, so that one QP's datagrams leave and
  // complete in posting order (the QP's lock is not held while sending).
  std::mutex tx_mu;
  std::set<std::string> groups;  // attached multicast GIDs (16 raw bytes each); Qp::mu
};
// UD and UC QPs (UC: the same datagrams, to the QP's one destination,
// without GRH or Q_Key; uc.cc receives them).
// Opens the QP's socket (ibv_create_qp): 0 or an errno value.
int udOpen(const std::shared_ptr<Qp>& qp);
// Closes it and leaves every group (ibv_destroy_qp).
void udClose(Qp& qp);
// ibv_post_send on a UD QP (qp.mu not held).
int udPostSend(Qp* qp, ibv_send_wr* wr, ibv_send_wr** bad, bool all_or_nothing);
// The attributes a UD or UC QP's transition requires (the kernel's qp_state_table).
bool udTransitionOk(ibv_qp_type type, ibv_qp_state from, ibv_qp_state to, int mask);
// Places a UC datagram (uc.cc; q.mu held).
void ucReceive(Qp& q, const UdHeader& h, const uint8_t* payload);
// Sends one datagram from socket `fd` to the socket of QP `qpn` (the payload
// is `inl` if not null, else the scatter list): false if it was dropped.
bool udDeliver(int fd, const UdHeader& h, const ibv_sge* sg, int n, const void* inl, uint32_t qpn);

// Multicast (multicast.cc). Attached groups of a QP: their GIDs.
int mcAttach(Qp& qp, const ibv_gid& gid);
int mcDetach(Qp& qp, const ibv_gid& gid);
bool mcAttached(Qp& qp, const uint8_t* gid);  // qp.mu held
void mcDetachAll(Qp& qp);
// Sends `h` (dest_qpn kMulticastQpn) to every QP attached to h.dgid.
void mcSend(int fd, UdHeader h, const ibv_sge* sg, int n, const void* inl);

}  // namespace softrdma
