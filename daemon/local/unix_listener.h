// UnixListener: the daemon's listening Unix stream socket.
//
// Startup code (throws std::runtime_error with a message naming the path):
// the parent directory must exist; a stale socket file left by a dead daemon
// is replaced, but a live one (something accepts connections on it) or a
// non-socket file at the path is an error. The socket gets the configured
// mode and group, also when systemd passes it in (inheritedFd: the path is
// the one the socket is bound to; an abstract socket, or a mode or group that
// cannot be set, is an error). The file is removed again on destruction if it is still
// the one this listener created.
#pragma once

#include <sys/types.h>

#include <string>

#include "common/unique_fd.h"

namespace rdmamsg::local {

struct ListenerConfig {
  std::string path;
  mode_t mode = 0660;
  std::string group;     // empty: keep the daemon's group
  int inheritedFd = -1;  // an already listening socket (systemd socket activation)
  int backlog = 128;
};

class UnixListener {
 public:
  explicit UnixListener(const ListenerConfig& config);
  ~UnixListener();
  UnixListener(const UnixListener&) = delete;
  UnixListener& operator=(const UnixListener&) = delete;

  int fd() const { return fd_.get(); }
  const std::string& path() const { return path_; }

 private:
  void bindFresh(const ListenerConfig& config);

  std::string path_;
  UniqueFd fd_;
  ino_t inode_ = 0;  // of the socket file we created; 0 when inherited
  dev_t device_ = 0;
};

}  // namespace rdmamsg::local
