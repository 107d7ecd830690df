// A local client's credentials (peer_cred.h).
#include "daemon/local/peer_cred.h"

#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "common/log_limit.h"
#include "daemon/local/log.h"

namespace rdmamsg::local {
namespace {

// The supplementary groups the peer had when it connected (SO_PEERGROUPS,
// Linux 4.13): exact, and no race with a pid that exits or is reused.
// Empty when the kernel cannot say; the policy then sees only the primary gid.
std::vector<gid_t> readPeerGroups(int fd) {
  std::vector<gid_t> groups(32);
  for (int attempt = 0; attempt < 4; ++attempt) {
    socklen_t len = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) == 0) {
      groups.resize(len / sizeof(gid_t));
      return groups;
    }
    if (errno != ERANGE) break;
    groups.resize(len / sizeof(gid_t) + 1);  // len: the size needed
  }
  static LogLimit warned(1, std::chrono::hours(24));
  if (warned.admit())
    localLog().warn(
        "SO_PEERGROUPS failed ({}): local_policy sees only the primary group of clients",
        std::strerror(errno));
  return {};
}

}  // namespace

PeerCred readPeerCred(int fd) {
  ucred uc{};
  socklen_t len = sizeof(uc);
  PeerCred cred;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) == 0) {
    cred.pid = uc.pid;
    cred.uid = uc.uid;
    cred.gid = uc.gid;
    cred.known = true;
    cred.groups = readPeerGroups(fd);
  }
  return cred;
}

config::Identity identityOf(const PeerCred& c) {
  return {c.uid, c.gid, c.groups, c.known};
}

}  // namespace rdmamsg::local
