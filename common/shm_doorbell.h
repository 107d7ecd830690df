// ShmDoorbell: the eventfd one side of a shared-memory ring signals to wake
// the other, and the counter of how often it was rung.
//
// A doorbell is rung only when the ring says the other side is asleep
// (ShmRingProducer/ShmRingConsumer::needsWake(), shm_ring.h): a busy pair
// makes no system call per record. `rings()` counts the system calls made,
// so tests and benchmarks can report them per message.
//
// The eventfd is nonblocking and close-on-exec. The sleeping side polls
// fd() (poll(2) or its event loop) and then drain()s it. A peer can write to
// the same eventfd; ring() treats a full counter (EAGAIN) as rung, since the
// reader is then woken anyway.
#pragma once

#include <cstdint>

#include "common/status.h"
#include "common/unique_fd.h"

namespace rdmamsg {

class ShmDoorbell {
 public:
  ShmDoorbell() = default;

  // A new eventfd (EFD_NONBLOCK|EFD_CLOEXEC).
  [[nodiscard]] static Result<ShmDoorbell> create();
  // An eventfd received from the other side; refused (protocol_error) when
  // the fd is not an eventfd. It is made nonblocking.
  [[nodiscard]] static Result<ShmDoorbell> adopt(UniqueFd fd);

  // Wakes the side that polls this eventfd. One write(2); counted.
  [[nodiscard]] Status ring();
  // Resets the eventfd after a wake-up; returns whether it had been rung.
  // One read(2).
  [[nodiscard]] Result<bool> drain();
  // The same, returning how often it was rung since the last reset (each
  // ring() adds one; 0 when it was not rung).
  [[nodiscard]] Result<uint64_t> take();

  int fd() const { return fd_.get(); }
  bool valid() const { return fd_.valid(); }
  // Times ring() made its system call.
  uint64_t rings() const { return rings_; }

 private:
  explicit ShmDoorbell(UniqueFd fd) : fd_(std::move(fd)) {}

  UniqueFd fd_;
  uint64_t rings_ = 0;
};

}  // namespace rdmamsg
