// SocketTransport: librdmamsg's Unix stream socket to rdmamsgd — connecting,
// and moving bytes between the socket and the library's buffers without
// waiting; poll() and pollWith() are the calls that wait. Without shared
// memory every frame goes through it; with shared memory it carries the
// offer (with the region's and doorbells' fds) and then only the daemon's
// closing ERROR or the connection's end.
//
// It counts its system calls (ClientCounters) and reports failures as a
// Status; what a failure means for the connection is its owner's decision.
#pragma once

#include <chrono>
#include <cstddef>
#include <span>
#include <string>

#include "common/byte_buffer.h"
#include "common/status.h"
#include "common/unique_fd.h"
#include "rdmamsg/client.h"

namespace rdmamsg::client {

// "<what>: <strerror(err)>" with `code`.
Status errnoStatus(Errc code, const std::string& what, int err);

class SocketTransport {
 public:
  // Connects to `path`: bad_request (path too long), timeout (the daemon's
  // backlog is full for `timeout`), io_error.
  Status connect(const std::string& path, std::chrono::milliseconds timeout);
  bool isOpen() const { return fd_.valid(); }
  int fd() const { return fd_.get(); }
  void close() { fd_.reset(); }

  // Writes what the socket takes of `out` now, consumed from it: ok (all
  // written, or the socket is full), io_error.
  Status write(ByteBuffer& out);
  // One read of up to `chunk` bytes, appended to `into`: the bytes read
  // (0: none now); not_connected at the connection's end; io_error.
  Result<size_t> read(ByteBuffer& into, size_t chunk);
  // `bytes` (at least one) with `fds` attached: how many bytes went.
  Result<size_t> sendWithFds(std::span<const int> fds, std::span<const std::byte> bytes);

  // Waits up to `ms` for the socket to be readable (or writable, with
  // `wantWrite`): ok also when interrupted; io_error.
  Status poll(bool wantWrite, int ms);
  // Waits up to `ms` for `otherFd` or the socket to be readable: whether
  // the socket is; io_error.
  Result<bool> pollWith(int otherFd, int ms);

  // socketReads, socketWrites and polls so far (the rest are 0).
  const ClientCounters& counters() const { return counters_; }

 private:
  UniqueFd fd_;
  ClientCounters counters_;
};

}  // namespace rdmamsg::client
