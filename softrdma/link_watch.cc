// Ports that follow their interface's link. With SOFTRDMA_DEVICES, the
// progress thread listens to the kernel's link notifications (a netlink
// socket in RTMGRP_LINK) and, on each, compares every device's port with
// its interface: up and running, the port is ACTIVE; otherwise DOWN. As
// rxe does on NETDEV_DOWN / NETDEV_CHANGE, a change raises PORT_ERR or
// PORT_ACTIVE on the device's contexts.
//
// Over TCP a lost link does not break a connection by itself (the socket
// waits for the link to return), whereas an RC QP's transport gives up: a
// port going down here severs every connection over its device, whose QPs
// then fail as after a lost peer (outstanding and new sends complete with
// IBV_WC_RETRY_EXC_ERR, rdma_cm reports DISCONNECTED). Connections over the
// other devices carry on.
//
// Each notification also compares every interface's hardware address with
// the one it had at the previous look: a changed address (the kernel's
// NETDEV_BONDING_FAILOVER brings the same to the rdma_cm) raises
// RDMA_CM_EVENT_ADDR_CHANGE on the ids bound to the device (changeCmAddress,
// cm.cc).
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base.h"
#include "cm_id.h"
#include "conn.h"
#include "counters.h"
#include "device.h"
#include "fabric.h"
#include "netdev.h"

namespace softrdma {

namespace {

// The hardware address of each device's interface at the previous look
// ("": none, or the interface did not exist), progress thread only.
std::vector<std::string>& lastHwAddrs() {
  static auto* v = new std::vector<std::string>();
  return *v;
}

// Every device's port takes its interface's link state, and a changed
// hardware address is reported to rdma_cm (progress thread). An interface
// that appears, or comes back, brings no ADDR_CHANGE: it is a new netdev
// (another index), which the ids bound to the old one do not name.
void followLinks() {
  auto& last = lastHwAddrs();
  last.resize(static_cast<size_t>(deviceCount()));
  for (int i = 0; i < deviceCount(); i++) {
    changePort(i, interfaceRunning(i), false);
    std::string hw = interfaceHwAddr(i);
    if (!hw.empty() && !last[i].empty() && hw != last[i]) {
      debugLog("device %d: the hardware address of %s changed", i, deviceInterface(i).c_str());
      changeCmAddress(interfaceIndex(i), hw);
    }
    last[i] = std::move(hw);
  }
}

struct LinkWatch : Endpoint {
  void onEvents(uint32_t) override {
    char buf[8192];
    for (;;) {
      ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n >= 0 || errno == EINTR || errno == ENOBUFS) continue;  // ENOBUFS: some were lost
      break;                                                       // EAGAIN: all read
    }
    followLinks();  // whatever changed: the state is read, not parsed from the messages
  }
};

}  // namespace

int changePort(int index, bool up, bool keep) {
  int r = setPortState(index, up);
  if (r <= 0) return r;  // absent, or no change (no event)
  debugLog("device %d: port %s", index, up ? "up" : "down");
  if (!up) count(Counter::LinkDowned);
  raiseOnContexts(index, up ? IBV_EVENT_PORT_ACTIVE : IBV_EVENT_PORT_ERR, kAsyncPort);
  if (up || keep) return 1;
  for (auto& ep : Fabric::get().endpoints()) {
    auto c = std::dynamic_pointer_cast<Conn>(ep);
    if (c && deviceOfSocket(c->fd) == index) c->sever("the port went down");
  }
  return 1;
}

void startLinkWatch(Fabric& f) {
  if (deviceInterfaces().empty()) return;  // one device over every address: no link to follow
  int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_ROUTE);
  sockaddr_nl a{};
  a.nl_family = AF_NETLINK;
  a.nl_groups = RTMGRP_LINK;
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    warnLog("SOFTRDMA_DEVICES: cannot watch the links (netlink: %s), ports stay as they were",
            strerror(errno));
    if (fd >= 0) close(fd);
    return;
  }
  auto ep = std::make_shared<LinkWatch>();
  ep->fd = fd;
  f.add(ep, EPOLLIN);
  f.post(followLinks);  // a change between the devices' creation and this socket's
}

}  // namespace softrdma
