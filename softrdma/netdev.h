// The network interfaces under the devices (netdev.cc): which interfaces
// SOFTRDMA_DEVICES names, their addresses (a device's GID table), their
// link state (a device's port state, followed by link_watch.cc), their
// hardware address (rdma_cm's ADDR_CHANGE, link_watch.cc), and which device
// holds an address.
// Without SOFTRDMA_DEVICES there is one device over every address of the
// machine, its port following no interface.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <string>
#include <vector>

namespace softrdma {

// The interfaces SOFTRDMA_DEVICES names (IFNAME[,IFNAME...]), device i over
// interface i; empty when it is unset: one device over every address.
const std::vector<std::string>& deviceInterfaces();
// The number of devices: one per named interface, or one.
int deviceSlots();
// The interface of device `index` ("" for the single device over every address).
std::string deviceInterface(int index);
// The IPv4-mapped GIDs of the addresses of device `index`'s interface (of
// every interface for the single device), loopback first.
std::vector<in6_addr> interfaceGids(int index);
// The IPv4-mapped GIDs of every address of the machine, loopback first.
std::vector<in6_addr> hostGids();
// Whether the link of device `index`'s interface is up and running
// (IFF_UP and IFF_RUNNING, the kernel's netif_running && carrier). Always
// true for the single device over every address.
bool interfaceRunning(int index);
// The hardware (MAC) address of device `index`'s interface, as the bytes
// SIOCGIFHWADDR reports; "" for the single device over every address, or an
// interface that does not exist.
std::string interfaceHwAddr(int index);
// The kernel's index of device `index`'s interface (1 for the single
// device, or an interface that does not exist).
unsigned interfaceIndex(int index);
// The device whose interface holds the address (IPv4, IPv6 or IPv4-mapped),
// or -1: none, or a wildcard address. Always 0 without SOFTRDMA_DEVICES.
int deviceForAddress(const sockaddr* addr);
// Whether two socket addresses name the same IP address (ports aside).
bool sameAddress(const sockaddr* a, const sockaddr* b);
// The device over which the TCP socket `fd` runs (its local address), or -1.
int deviceOfSocket(int fd);

// Device `index`'s port goes up or down (a link change, or the control
// channel's port-up / port-down): PORT_ACTIVE or PORT_ERR on its contexts
// and, going down unless `keep`, every connection over it severed
// (link_watch.cc; progress thread). 1 if it changed, 0 if not, -1 while the
// device is absent.
int changePort(int index, bool up, bool keep);

}  // namespace softrdma
