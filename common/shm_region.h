// ShmRegion: a shared-memory region that two processes map, backed by a memfd.
//
// The creating side makes a memfd of a fixed size, seals it against shrinking
// and growing (F_SEAL_SHRINK|F_SEAL_GROW, then F_SEAL_SEAL so that no seal can
// be added or removed later) and maps it shared. Its fd goes to the other side
// over a Unix socket (common/fd_passing.h). The attaching side maps the fd it
// received only after checking that it is sealed against shrinking — a peer
// that could shrink the file under our mapping could make every later access
// fault with SIGBUS — and that its size is the one agreed on.
//
// Sealing only fixes the size: the contents stay writable by both sides at
// any time. Whatever lies in the region is untrusted input (see shm_ring.h).
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "common/status.h"
#include "common/unique_fd.h"

namespace rdmamsg {

class ShmRegion {
 public:
  ShmRegion() = default;
  ~ShmRegion();
  ShmRegion(ShmRegion&& other) noexcept;
  ShmRegion& operator=(ShmRegion&& other) noexcept;
  ShmRegion(const ShmRegion&) = delete;
  ShmRegion& operator=(const ShmRegion&) = delete;

  // A new sealed memfd of `size` bytes (zero-filled), mapped shared. `name`
  // shows in /proc/PID/fd and /proc/PID/maps ("memfd:NAME").
  [[nodiscard]] static Result<ShmRegion> create(const std::string& name, size_t size);

  // Maps a memfd received from the other side. Refused (protocol_error, the
  // fd is closed) unless it is sealed against shrinking and exactly
  // `expectedSize` bytes long.
  [[nodiscard]] static Result<ShmRegion> attach(UniqueFd fd, size_t expectedSize);
  // The size of the file behind `fd` (fstat), before attach() checks it.
  [[nodiscard]] static Result<size_t> fileSize(int fd);

  std::span<std::byte> bytes() const { return {base_, size_}; }
  size_t size() const { return size_; }
  // The memfd, to pass to the other side (the region keeps owning it).
  int fd() const { return fd_.get(); }
  bool valid() const { return base_ != nullptr; }

 private:
  ShmRegion(UniqueFd fd, std::byte* base, size_t size)
      : fd_(std::move(fd)), base_(base), size_(size) {}
  void unmap();

  UniqueFd fd_;
  std::byte* base_ = nullptr;
  size_t size_ = 0;
};

}  // namespace rdmamsg
