// Test support: a client speaking raw frames over a nonblocking Unix socket,
// for driving LocalServer from a test that steps the event loop itself.
#pragma once

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "common/byte_buffer.h"
#include "common/local_protocol.h"
#include "common/unique_fd.h"

namespace rdmamsg::test {

class RawClient {
 public:
  explicit RawClient(const std::string& path) {
    fd_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    connected_ = ::connect(fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    ::fcntl(fd_.get(), F_SETFL, O_NONBLOCK);
  }
  bool connected() const { return connected_; }
  int fd() const { return fd_.get(); }

  // Queue frames into out() and call write(); returns false on EAGAIN with
  // bytes left (they stay queued for the next write()).
  ByteBuffer& out() { return out_; }
  bool write() {
    while (!out_.empty()) {
      ssize_t n = ::send(fd_.get(), out_.data(), out_.size(), MSG_NOSIGNAL);
      if (n > 0) {
        out_.consume(static_cast<size_t>(n));
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return false;
      } else {
        writeFailed_ = true;
        return false;
      }
    }
    return true;
  }
  bool writeFailed() const { return writeFailed_; }

  // Reads what is there and decodes the next frame; views in `f` stay valid
  // until the next call.
  bool next(proto::Frame& f) {
    in_.consume(pending_);
    pending_ = 0;
    readAvailable();
    auto r = proto::decodeFrame(in_.readable(), 1u << 24);
    if (!r || r->kind != proto::Decoded::Kind::frame) return false;
    f = r->frame;
    pending_ = r->consumed;
    if (f.kind == proto::FrameKind::deliver || f.kind == proto::FrameKind::msg ||
        f.kind == proto::FrameKind::reply)
      ++delivered_;
    return true;
  }
  // Says that the application took every DELIVER, MSG and REPLY read so far (CONSUMED).
  bool consumeAll() {
    proto::encodeConsumed(out_, delivered_);
    return write();
  }
  uint64_t delivered() const { return delivered_; }
  // Every byte read and not yet decoded, as text (for frames of another version).
  std::string rawInput() {
    readAvailable();
    auto r = in_.readable();
    return std::string(reinterpret_cast<const char*>(r.data()), r.size());
  }
  // True once the server closed the connection (and every byte was read).
  bool sawEof() {
    readAvailable();
    return eof_;
  }

 private:
  void readAvailable() {
    for (;;) {
      auto room = in_.prepare(65536);
      ssize_t n = ::recv(fd_.get(), room.data(), room.size(), MSG_DONTWAIT);
      if (n > 0) {
        in_.commit(static_cast<size_t>(n));
        continue;
      }
      if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) eof_ = true;
      return;
    }
  }

  UniqueFd fd_;
  bool connected_ = false;
  bool eof_ = false;
  bool writeFailed_ = false;
  ByteBuffer in_;
  ByteBuffer out_;
  size_t pending_ = 0;
  uint64_t delivered_ = 0;
};

}  // namespace rdmamsg::test
