// rdmamsg::Status, the error codes shared by daemon, client library and wire
// protocol, and a small Result<T> carrying either a value or a Status.
//
// Error rule: a Status is an outcome the caller must handle (the hot path never
// throws). The numeric value of every Errc is part of the local client wire
// protocol (docs/protocol.md); never renumber, only append.
//
// Installed as <rdmamsg/status.h> (librdmamsg's public API); the build tree
// holds a copy under that name, so an include guard (beside #pragma once)
// keeps the two from clashing.
#pragma once
#ifndef RDMAMSG_STATUS_H_
#define RDMAMSG_STATUS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace rdmamsg {

enum class Errc : uint16_t {
  ok = 0,
  unknown_node = 1,        // destination node is not configured
  unknown_service = 2,     // no listener registered for the service on that node
  peer_unreachable = 3,    // peer daemon down / connection lost before delivery
  too_large = 4,           // payload exceeds the configured maximum message size
  timeout = 5,             // no answer within the deadline
  bad_request = 6,         // a well-formed request that cannot be honoured (bad name, id 0, …)
  duplicate_service = 7,   // the service is already registered on this node
  busy = 8,                // resource exhausted; retry later
  shutting_down = 9,       // the daemon is stopping
  protocol_error = 10,     // malformed frame; the connection is closed
  io_error = 11,           // socket error (connect, read, write)
  not_connected = 12,      // operation on a closed client
  would_block = 13,        // trySend: the socket is full; retry once fd() is writable
  permission_denied = 14,  // the daemon's local_policy does not allow this client the request
  no_subscribers = 15,     // a publish matched no subscription anywhere in the mesh
  no_responders = 16,      // a request matched no subscription anywhere in the mesh
};

// Largest Errc value the daemon sends; decoders reject anything above it, and
// would_block, which never crosses the socket (the client library makes it).
inline constexpr uint16_t kMaxErrc = static_cast<uint16_t>(Errc::no_responders);

// Stable lower-case name of a code, e.g. "unknown_service".
std::string_view toString(Errc code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Errc code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status okStatus() { return Status(); }

  bool ok() const { return code_ == Errc::ok; }
  explicit operator bool() const { return ok(); }
  Errc code() const { return code_; }
  const std::string& message() const { return message_; }

  // "ok", or "<code>: <message>" (just "<code>" when there is no message).
  std::string toString() const;

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  Errc code_ = Errc::ok;
  std::string message_;
};

// A value or an error. `ok()` tells which; `value()` on an error aborts.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}         // NOLINT(google-explicit-constructor)
  Result(Status status) : status_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    if (status_.ok()) status_ = Status(Errc::bad_request, "Result built from an ok Status");
  }

  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Status& status() const { return status_; }

  T& value() & { return *checked(); }
  const T& value() const& { return *checked(); }
  T&& value() && { return std::move(*checked()); }
  T* operator->() { return checked(); }
  const T* operator->() const { return checked(); }
  T& operator*() & { return *checked(); }
  const T& operator*() const& { return *checked(); }

 private:
  T* checked() const {
    if (!value_) abortOnError(status_);
    return const_cast<T*>(&*value_);
  }
  [[noreturn]] static void abortOnError(const Status& status);

  std::optional<T> value_;
  Status status_;
};

[[noreturn]] void abortOnResultError(const Status& status);

template <typename T>
void Result<T>::abortOnError(const Status& status) {
  abortOnResultError(status);
}

}  // namespace rdmamsg

#endif  // RDMAMSG_STATUS_H_
