// The network interfaces under the devices. As with rxe, where
// `rdma link add rxe0 type rxe netdev eth0` puts a device over one
// interface, SOFTRDMA_DEVICES=eth0,eth1 puts softrdma0 over eth0 and
// softrdma1 over eth1: each device's GID table holds its interface's
// addresses, and its port follows the interface's link.
#include "netdev.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "base.h"

namespace softrdma {

namespace {

std::vector<std::string> parseInterfaces() {
  std::vector<std::string> names;
  const char* v = getenv("SOFTRDMA_DEVICES");
  if (v == nullptr) return names;
  std::string all = v;
  size_t start = 0;
  while (start <= all.size()) {
    size_t end = all.find(',', start);
    if (end == std::string::npos) end = all.size();
    std::string name = all.substr(start, end - start);
    start = end + 1;
    if (name.empty()) continue;
    if (name.size() >= IFNAMSIZ || name.find(':') != std::string::npos) {
      warnLog("SOFTRDMA_DEVICES: '%s' is not an interface name, left out", name.c_str());
    } else if (std::find(names.begin(), names.end(), name) != names.end()) {
      warnLog("SOFTRDMA_DEVICES: '%s' named twice, one device for it", name.c_str());
    } else {
      names.push_back(name);
    }
  }
  return names;
}

// Whether the address entry `label` (an interface name, or an alias label
// such as "eth0:1") belongs to the interface `name`.
bool ofInterface(const char* label, const std::string& name) {
  size_t n = name.size();
  return strncmp(label, name.c_str(), n) == 0 && (label[n] == '\0' || label[n] == ':');
}

in6_addr mapV4(in_addr a) {
  in6_addr g{};
  g.s6_addr[10] = 0xff;
  g.s6_addr[11] = 0xff;
  memcpy(&g.s6_addr[12], &a, 4);
  return g;
}

}  // namespace

bool sameAddress(const sockaddr* a, const sockaddr* b) {
  if (a->sa_family != b->sa_family) return false;
  if (a->sa_family == AF_INET)
    return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(b)->sin_addr.s_addr;
  return IN6_ARE_ADDR_EQUAL(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr,
                            &reinterpret_cast<const sockaddr_in6*>(b)->sin6_addr);
}

const std::vector<std::string>& deviceInterfaces() {
  static const auto* names = new std::vector<std::string>(parseInterfaces());
  return *names;
}

int deviceSlots() {
  const size_t n = deviceInterfaces().size();
  return n == 0 ? 1 : static_cast<int>(n);
}

std::string deviceInterface(int index) {
  const auto& names = deviceInterfaces();
  if (index < 0 || static_cast<size_t>(index) >= names.size()) return "";
  return names[index];
}

// The GIDs of interface `name`'s addresses, or of every address (`every`).
static std::vector<in6_addr> gidsOf(const std::string& name, bool every) {
  std::vector<in6_addr> gids;
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) == 0) {
    for (ifaddrs* i = ifs; i != nullptr; i = i->ifa_next) {
      if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
      if (!every && !ofInterface(i->ifa_name, name)) continue;
      gids.push_back(mapV4(reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr));
    }
    freeifaddrs(ifs);
  }
  if (every && gids.empty()) gids.push_back(mapV4(in_addr{htonl(INADDR_LOOPBACK)}));
  // Loopback addresses first, so that GID index 0 is 127.0.0.1 wherever lo is up.
  std::stable_partition(gids.begin(), gids.end(),
                        [](const in6_addr& g) { return g.s6_addr[12] == 127; });
  return gids;
}

std::vector<in6_addr> interfaceGids(int index) {
  return gidsOf(deviceInterface(index), deviceInterfaces().empty());
}

std::vector<in6_addr> hostGids() {
  return gidsOf("", true);
}

bool interfaceRunning(int index) {
  if (deviceInterfaces().empty()) return true;
  const std::string name = deviceInterface(index);
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return false;
  ifreq r{};
  memcpy(r.ifr_name, name.c_str(), name.size() + 1);
  const bool ok = ioctl(s, SIOCGIFFLAGS, &r) == 0;
  close(s);
  return ok && (r.ifr_flags & IFF_UP) != 0 && (r.ifr_flags & IFF_RUNNING) != 0;
}

std::string interfaceHwAddr(int index) {
  if (deviceInterfaces().empty()) return "";
  const std::string name = deviceInterface(index);
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return "";
  ifreq r{};
  memcpy(r.ifr_name, name.c_str(), name.size() + 1);
  const bool ok = ioctl(s, SIOCGIFHWADDR, &r) == 0;
  close(s);
  return ok ? std::string(r.ifr_hwaddr.sa_data, sizeof r.ifr_hwaddr.sa_data) : "";
}

unsigned interfaceIndex(int index) {
  if (deviceInterfaces().empty()) return 1;
  unsigned i = if_nametoindex(deviceInterface(index).c_str());
  return i != 0 ? i : 1;
}

int deviceForAddress(const sockaddr* addr) {
  const auto& names = deviceInterfaces();
  if (names.empty()) return 0;
  if (addr == nullptr) return -1;
  sockaddr_storage a{};
  memcpy(&a, addr, addr->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in));
  auto* a6 = reinterpret_cast<sockaddr_in6*>(&a);
  if (a.ss_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&a6->sin6_addr)) {
    sockaddr_in a4{};
    a4.sin_family = AF_INET;
    memcpy(&a4.sin_addr, &a6->sin6_addr.s6_addr[12], 4);
    memset(&a, 0, sizeof a);
    memcpy(&a, &a4, sizeof a4);
  }
  int found = -1;
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) != 0) return -1;
  for (ifaddrs* i = ifs; i != nullptr && found < 0; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || !sameAddress(i->ifa_addr, reinterpret_cast<sockaddr*>(&a)))
      continue;
    for (size_t d = 0; d < names.size(); d++)
      if (ofInterface(i->ifa_name, names[d])) found = static_cast<int>(d);
  }
  freeifaddrs(ifs);
  return found;
}

int deviceOfSocket(int fd) {
  if (deviceInterfaces().empty()) return 0;
  sockaddr_storage local{};
  socklen_t l = sizeof local;
  if (fd < 0 || getsockname(fd, reinterpret_cast<sockaddr*>(&local), &l) != 0) return -1;
  return deviceForAddress(reinterpret_cast<sockaddr*>(&local));
}

}  // namespace softrdma
