// Multicast: ibv_attach_mcast / ibv_detach_mcast and the fan-out of a
// datagram sent to a multicast GID (ud.h).
//
// A group is a directory, /dev/shm/softrdma-UID/mc-<MGID in hex>, with one
// empty file per attached QP, named by its number. A sender lists the
// directory and writes one copy of the datagram to each member's socket;
// each receiving QP checks that it is still attached. So every QP attached
// to a group, in any process of this machine (and network namespace), gets
// every datagram sent to it, the sender's own QP included when it is
// attached, as with an HCA's multicast loopback.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "base.h"
#include "device.h"
#include "qp.h"
#include "ud.h"
#include "wire.h"

namespace softrdma {

namespace {

constexpr int kMaxQpsPerGroup = 56;  // rxe's max_mcast_qp_attach

std::string groupDir(const uint8_t* gid) {
  static const char kHex[] = "0123456789abcdef";
  std::string d = shmDir() + "/mc-";
  for (int i = 0; i < 16; i++) {
    d += kHex[gid[i] >> 4];
    d += kHex[gid[i] & 15];
  }
  return d;
}

std::string key(const uint8_t* gid) {
  return std::string(reinterpret_cast<const char*>(gid), 16);
}

// Calls fn(qpn) for every QP attached to the group.
template <typename Fn>
int forEachMember(const std::string& dir, Fn fn) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return 0;
  int n = 0;
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    unsigned long qpn = strtoul(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0') continue;
    n++;
    fn(static_cast<uint32_t>(qpn));
  }
  closedir(d);
  return n;
}

}  // namespace

int mcAttach(Qp& qp, const ibv_gid& gid) {
  if (qp.qp.qp_type != IBV_QPT_UD || !qp.ud || !gidIsMulticast(gid.raw)) return EINVAL;
  std::lock_guard lk(qp.mu);
  if (qp.ud->groups.count(key(gid.raw)) != 0) return 0;  // attached already
  std::string dir = groupDir(gid.raw);
  mkdir(dir.c_str(), 0700);
  if (forEachMember(dir, [](uint32_t) {}) >= kMaxQpsPerGroup) return ENOMEM;
  std::string f = dir + "/" + std::to_string(qp.qp.qp_num);
  int fd = open(f.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0) return errno;
  close(fd);
  qp.ud->groups.insert(key(gid.raw));
  return 0;
}

static void leave(uint32_t qpn, const std::string& gid) {
  std::string dir = groupDir(reinterpret_cast<const uint8_t*>(gid.data()));
  unlink((dir + "/" + std::to_string(qpn)).c_str());
  rmdir(dir.c_str());  // only once empty
}

int mcDetach(Qp& qp, const ibv_gid& gid) {
  if (qp.qp.qp_type != IBV_QPT_UD || !qp.ud) return EINVAL;
  std::lock_guard lk(qp.mu);
  if (qp.ud->groups.erase(key(gid.raw)) == 0) return EINVAL;  // not attached
  leave(qp.qp.qp_num, key(gid.raw));
  return 0;
}

bool mcAttached(Qp& qp, const uint8_t* gid) {
  return qp.ud && qp.ud->groups.count(key(gid)) != 0;
}

void mcDetachAll(Qp& qp) {
  std::lock_guard lk(qp.mu);
  for (const std::string& g : qp.ud->groups)
    leave(qp.qp.qp_num, g);
  qp.ud->groups.clear();
}

void mcSend(int fd, UdHeader h, const ibv_sge* sg, int n, const void* inl) {
  std::string dir = groupDir(h.dgid);
  forEachMember(dir, [&](uint32_t qpn) {
    // A member whose process ended without leaving: its entry goes.
    if (!udDeliver(fd, h, sg, n, inl, qpn) && (errno == ECONNREFUSED || errno == ENOENT))
      unlink((dir + "/" + std::to_string(qpn)).c_str());
  });
}

}  // namespace softrdma

using namespace softrdma;

SOFTRDMA_API int ibv_attach_mcast(ibv_qp* q, const ibv_gid* gid, uint16_t) {
  if (q == nullptr || gid == nullptr) return EINVAL;
  if (contextDead(q->context)) return EIO;
  auto qp = qpRef(q);
  return qp ? mcAttach(*qp, *gid) : EINVAL;
}

SOFTRDMA_API int ibv_detach_mcast(ibv_qp* q, const ibv_gid* gid, uint16_t) {
  if (q == nullptr || gid == nullptr) return EINVAL;
  auto qp = qpRef(q);
  return qp ? mcDetach(*qp, *gid) : EINVAL;
}
