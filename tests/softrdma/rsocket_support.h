// Test support for rsockets: a listener on 127.0.0.1 (a free port) and a connected pair.
#pragma once

#include <netinet/in.h>
#include <rdma/rsocket.h>

#include <functional>

#include "support.h"

namespace rdmamsg::test {

// A listening rsocket, a client connected to it and the server side accepted. The destructor
// closes what is left open.
struct RsPair {
  int listener = -1, client = -1, server = -1;
  uint16_t port = 0;

  RsPair() = default;
  RsPair(const RsPair&) = delete;
  RsPair& operator=(const RsPair&) = delete;
  ~RsPair() {
    for (int fd : {client, server, listener})
      if (fd >= 0) rclose(fd);
  }

  // Listens on 127.0.0.1, port 0 (the kernel picks one); `options` runs on the listener first.
  bool listen(const std::function<void(int)>& options = {}) {
    listener = rsocket(AF_INET, SOCK_STREAM, 0);
    if (listener < 0) return false;
    if (options) options(listener);
    sockaddr_in a = ipv4("127.0.0.1", 0);
    socklen_t len = sizeof a;
    if (rbind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        rlisten(listener, 8) != 0 ||
        rgetsockname(listener, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      return false;
    port = ntohs(a.sin_port);
    return true;
  }

  // Blocking connect and accept (listening first if not yet); `options` runs on the client.
  bool connect(const std::function<void(int)>& options = {}) {
    if (listener < 0 && !listen()) return false;
    client = rsocket(AF_INET, SOCK_STREAM, 0);
    if (client < 0) return false;
    if (options) options(client);
    sockaddr_in to = ipv4("127.0.0.1", port);
    if (rconnect(client, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) return false;
    server = raccept(listener, nullptr, nullptr);
    return server >= 0;
  }
};

// Waits (rpoll) until `fd` has at least `bytes` to read, peeking; false after the deadline.
inline bool waitReadableRs(int fd, size_t bytes) {
  std::vector<char> buf(bytes);
  const auto deadline = std::chrono::steady_clock::now() + kDeadline;
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (rpoll(&p, 1, int(kDeadline.count())) != 1) return false;
    if (rrecv(fd, buf.data(), bytes, MSG_PEEK | MSG_DONTWAIT) == ssize_t(bytes)) return true;
  }
  return false;
}

}  // namespace rdmamsg::test
