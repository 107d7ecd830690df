// Integration-test support: a blocking client speaking raw local-protocol
// frames to a running rdmamsgd, for checks the client library would not let
// through (e.g. an oversized SEND, which librdmamsg refuses itself).
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <span>
#include <string>

#include "common/byte_buffer.h"
#include "common/local_protocol.h"
#include "common/unique_fd.h"

namespace rdmamsg::itest {

// A decoded frame that owns its text.
struct RawFrame {
  proto::FrameKind kind{};
  uint64_t msgId = 0;
  Errc errc = Errc::ok;
  std::string text;
};

class RawSession {
 public:
  explicit RawSession(const std::string& path) {
    fd_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    if (::connect(fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
      error_ = std::string("connect: ") + std::strerror(errno);
  }

  const std::string& error() const { return error_; }

  // HELLO, then WELCOME.
  bool handshake() {
    ByteBuffer out;
    proto::encodeHello(out, "itest-raw");
    if (!writeAll(out)) return false;
    auto f = nextFrame(std::chrono::seconds(5));
    if (!f || f->kind != proto::FrameKind::welcome) {
      error_ += " (no WELCOME)";
      return false;
    }
    return true;
  }

  bool registerService(std::string_view service) {
    ByteBuffer out;
    proto::encodeRegister(out, service);
    return writeAll(out);
  }

  // Bounds every later write: a daemon that stops reading fails it.
  void setSendTimeout(std::chrono::milliseconds t) {
    timeval tv{static_cast<time_t>(t.count() / 1000),
               static_cast<suseconds_t>(t.count() % 1000 * 1000)};
    ::setsockopt(fd_.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  }

  bool sendMessage(uint64_t msgId, std::string_view node, std::string_view service,
                   std::span<const std::byte> payload) {
    ByteBuffer out;
    proto::encodeSend(out, msgId, node, service, "", payload);
    return writeAll(out);
  }

  // The next frame, waiting up to `timeout`.
  std::optional<RawFrame> nextFrame(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      auto r = proto::decodeFrame(in_.readable(), 64u << 20);
      if (r && r->kind == proto::Decoded::Kind::other_version) r = proto::unsupportedVersion();
      if (!r) {
        error_ = "undecodable frame: " + r.status().message();
        return std::nullopt;
      }
      if (r->kind == proto::Decoded::Kind::frame) {
        RawFrame f{r->frame.kind, r->frame.msgId, r->frame.errc, std::string(r->frame.text)};
        in_.consume(r->consumed);
        return f;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        error_ = "timed out waiting for a frame";
        return std::nullopt;
      }
      pollfd p{fd_.get(), POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      auto room = in_.prepare(65536);
      ssize_t n = ::recv(fd_.get(), room.data(), room.size(), 0);
      if (n <= 0) {
        error_ = n == 0 ? "connection closed" : std::string("recv: ") + std::strerror(errno);
        return std::nullopt;
      }
      in_.commit(static_cast<size_t>(n));
    }
  }

 private:
  bool writeAll(const ByteBuffer& out) {
    size_t done = 0;
    while (done < out.size()) {
      ssize_t n = ::send(fd_.get(), out.data() + done, out.size() - done, MSG_NOSIGNAL);
      if (n <= 0) {
        error_ = std::string("send: ") + std::strerror(errno);
        return false;
      }
      done += static_cast<size_t>(n);
    }
    return true;
  }

  UniqueFd fd_;
  ByteBuffer in_;
  std::string error_;
};

}  // namespace rdmamsg::itest
