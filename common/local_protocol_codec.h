// The local protocol's field codec, shared by the files that encode and
// decode its frames (local_protocol.cc, local_protocol_pubsub.cc): little-
// endian integers, length-prefixed strings, and a reader whose first
// failure sticks and names its field. Private to common/.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

#include "common/byte_buffer.h"
#include "common/local_protocol.h"

namespace rdmamsg::proto::codec {

template <typename T>
T getLe(const std::byte* p) {
  T value = 0;
  for (size_t i = 0; i < sizeof(T); ++i)
    value |= static_cast<T>(static_cast<T>(p[i]) << (8 * i));
  return value;
}

// Writes one frame's fields into space reserved for the whole frame: one
// capacity check per frame, not per field.
class Writer {
 public:
  explicit Writer(std::byte* p) : p_(p) {}
  template <typename T>
  void le(T value) {
    for (size_t i = 0; i < sizeof(T); ++i)
      *p_++ = static_cast<std::byte>(value >> (8 * i));
  }
  void bytes(const void* src, size_t n) {
    if (n > 0) std::memcpy(p_, src, n);
    p_ += n;
  }
  void str8(std::string_view s) {
    le<uint8_t>(static_cast<uint8_t>(s.size()));
    bytes(s.data(), s.size());
  }
  void str16(std::string_view s) {
    le<uint16_t>(static_cast<uint16_t>(s.size()));
    bytes(s.data(), s.size());
  }

 private:
  std::byte* p_;
};

// Writes a frame header for a body of `bodyLength` bytes at `at` and
// returns the writer for the body (which the caller fills completely).
inline Writer frameAt(std::byte* at, FrameKind kind, size_t bodyLength,
                      uint8_t version = kProtocolVersion) {
  Writer w(at);
  w.le<uint32_t>(static_cast<uint32_t>(bodyLength));
  w.le<uint8_t>(version);
  w.le<uint8_t>(static_cast<uint8_t>(kind));
  w.le<uint16_t>(0);
  return w;
}

// Appends a frame of `bodyLength` bytes to `out`: frameAt() there.
inline Writer frame(ByteBuffer& out, FrameKind kind, size_t bodyLength,
                    uint8_t version = kProtocolVersion) {
  std::byte* at = out.prepare(kHeaderSize + bodyLength).data();
  out.commit(kHeaderSize + bodyLength);
  return frameAt(at, kind, bodyLength, version);
}

inline std::string_view clip(std::string_view s, size_t max) {
  return s.substr(0, std::min(s.size(), max));
}

// Reads fields from a body; the first failure sticks and names its field.
class Reader {
 public:
  explicit Reader(std::span<const std::byte> body) : body_(body) {}

  bool ok() const { return reason_ == nullptr; }
  const char* reason() const { return reason_; }
  void fail(const char* why) {
    if (reason_ == nullptr) reason_ = why;
  }

  template <typename T>
  T get(const char* field) {
    if (!ok() || body_.size() - pos_ < sizeof(T)) {
      fail(field);
      return 0;
    }
    T v = getLe<T>(body_.data() + pos_);
    pos_ += sizeof(T);
    return v;
  }

  std::string_view bytes(size_t n, const char* field) {
    if (!ok() || body_.size() - pos_ < n) {
      fail(field);
      return {};
    }
    std::string_view s(reinterpret_cast<const char*>(body_.data() + pos_), n);
    pos_ += n;
    return s;
  }

  std::string_view str8(const char* field) { return bytes(get<uint8_t>(field), field); }
  std::string_view str16(const char* field) { return bytes(get<uint16_t>(field), field); }

  // A name that must be valid (or, with allowEmpty, may be empty).
  std::string_view name(const char* field, bool allowEmpty = false) {
    std::string_view s = str8(field);
    if (ok() && !(allowEmpty && s.empty()) && !isValidName(s)) fail(field);
    return s;
  }

  size_t remaining() const { return body_.size() - pos_; }

  std::span<const std::byte> rest() {
    auto r = body_.subspan(std::min(pos_, body_.size()));
    pos_ = body_.size();
    return r;
  }

  void expectEnd() {
    if (ok() && pos_ != body_.size()) fail("trailing bytes after the last field");
  }

 private:
  std::span<const std::byte> body_;
  size_t pos_ = 0;
  const char* reason_ = nullptr;
};

// The bodies of the subject frames (local_protocol_pubsub.cc).
void parsePubSub(FrameKind kind, Reader& r, Frame& f);

}  // namespace rdmamsg::proto::codec
