// Creation of the listening Unix socket: stale files, permissions, group.
#include "daemon/local/unix_listener.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <vector>

namespace rdmamsg::local {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what, int err = 0) {
  std::string msg = "local socket " + path + ": " + what;
  if (err != 0) msg += std::string(": ") + std::strerror(err);
  throw std::runtime_error(msg);
}

sockaddr_un makeAddress(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) fail(path, "path empty or too long");
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return addr;
}

// True if a daemon accepts connections on `path`.
bool socketIsLive(const std::string& path) {
  UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!probe) return false;
  const sockaddr_un addr = makeAddress(path);
  return ::connect(probe.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0;
}

void removeStaleSocket(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return;
    fail(path, "cannot stat", errno);
  }
  if (!S_ISSOCK(st.st_mode)) fail(path, "exists and is not a socket");
  if (socketIsLive(path)) fail(path, "another daemon is listening on it");
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    fail(path, "cannot remove stale socket", errno);
}

gid_t lookupGroup(const std::string& path, const std::string& group) {
  if (group.find_first_not_of("0123456789") == std::string::npos && group.size() < 10)
    return static_cast<gid_t>(std::stoul(group));  // a numeric id
  std::vector<char> buf(16384);
  struct group gr {};
  struct group* found = nullptr;
  const int rc = ::getgrnam_r(group.c_str(), &gr, buf.data(), buf.size(), &found);
  if (rc != 0 || found == nullptr) fail(path, "unknown group '" + group + "'", rc);
  return found->gr_gid;
}

// The filesystem path an inherited listening socket is bound to.
std::string boundPath(int fd, const std::string& configured) {
  sockaddr_un addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    fail(configured, "getsockname on the socket passed by systemd", errno);
  if (addr.sun_family != AF_UNIX) fail(configured, "the socket passed by systemd is not AF_UNIX");
  const size_t n =
      len > offsetof(sockaddr_un, sun_path) ? len - offsetof(sockaddr_un, sun_path) : 0;
  if (n == 0 || addr.sun_path[0] == '\0')
    fail(configured,
         "the socket passed by systemd has no filesystem path (abstract or unnamed), so "
         "socket_mode and socket_group cannot apply to it; give the socket unit a path in "
         "ListenStream=");
  return std::string(addr.sun_path, strnlen(addr.sun_path, n));
}

// Gives the file of an inherited socket the configured mode and group, unless
// it has them already. Through an O_PATH descriptor of the file, checked to be
// a socket: a symlink put in its place is not followed.
void applyModeAndGroup(const std::string& path, const ListenerConfig& config) {
  UniqueFd file(::open(path.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
  if (!file) fail(path, "cannot open the socket file passed by systemd", errno);
  struct stat st {};
  if (::fstat(file.get(), &st) != 0) fail(path, "cannot stat", errno);
  if (!S_ISSOCK(st.st_mode)) fail(path, "the path of the socket passed by systemd is not a socket");
  const auto advice = std::string(
      "; set SocketMode= and SocketGroup= of the socket unit to socket_mode and socket_group, "
      "or let the daemon own the socket (SocketUser=)");
  if (!config.group.empty()) {
    const gid_t gid = lookupGroup(path, config.group);
    if (st.st_gid != gid &&
        ::fchownat(file.get(), "", static_cast<uid_t>(-1), gid, AT_EMPTY_PATH) != 0) {
      const int err = errno;
      fail(path, "cannot give the socket passed by systemd to group '" + config.group + "' (" +
                     std::strerror(err) + ")" + advice);
    }
  }
  if ((st.st_mode & 07777) != config.mode) {
    // chmod through /proc/self/fd: fchmod on an O_PATH descriptor is EBADF.
    const std::string procPath = "/proc/self/fd/" + std::to_string(file.get());
    if (::chmod(procPath.c_str(), config.mode) != 0) {
      const int err = errno;
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(config.mode));
      fail(path, std::string("cannot set mode ") + mode + " on the socket passed by systemd (" +
                     std::strerror(err) + ")" + advice);
    }
  }
}

}  // namespace

UnixListener::UnixListener(const ListenerConfig& config) : path_(config.path) {
  if (config.inheritedFd >= 0) {
    fd_.reset(config.inheritedFd);
    const int flags = ::fcntl(fd_.get(), F_GETFL);
    if (flags < 0 || ::fcntl(fd_.get(), F_SETFL, flags | O_NONBLOCK) != 0) {
      fail(path_, "cannot make the inherited socket nonblocking", errno);
    }
    // The configured mode and group hold for the socket systemd passes too.
    path_ = boundPath(fd_.get(), config.path);
    applyModeAndGroup(path_, config);
    return;
  }
  bindFresh(config);
}

void UnixListener::bindFresh(const ListenerConfig& config) {
  const std::filesystem::path parent = std::filesystem::path(path_).parent_path();
  std::error_code ec;
  if (!parent.empty() && !std::filesystem::is_directory(parent, ec)) {
    fail(path_, "parent directory " + parent.string() + " does not exist");
  }
  removeStaleSocket(path_);
  fd_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd_) fail(path_, "socket", errno);
  const sockaddr_un addr = makeAddress(path_);
  // Bind with a restrictive umask so the file never exists with wider modes.
  const mode_t oldMask = ::umask(0177);
  const int rc = ::bind(fd_.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  const int bindErr = errno;
  ::umask(oldMask);
  if (rc != 0) fail(path_, "bind", bindErr);
  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0) {
    inode_ = st.st_ino;
    device_ = st.st_dev;
  }
  if (!config.group.empty() &&
      ::chown(path_.c_str(), static_cast<uid_t>(-1), lookupGroup(path_, config.group)) != 0) {
    fail(path_, "chown to group '" + config.group + "'", errno);
  }
  if (::chmod(path_.c_str(), config.mode) != 0) fail(path_, "chmod", errno);
  if (::listen(fd_.get(), config.backlog) != 0) fail(path_, "listen", errno);
}

UnixListener::~UnixListener() {
  if (inode_ == 0) return;
  struct stat st {};
  if (::lstat(path_.c_str(), &st) == 0 && st.st_ino == inode_ && st.st_dev == device_) {
    ::unlink(path_.c_str());
  }
}

}  // namespace rdmamsg::local
