// ShmRegion: memfd creation, sealing, checks of a received fd, and mapping.
#include "common/shm_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "common/sys_error.h"

namespace rdmamsg {
namespace {

Result<std::byte*> mapShared(int fd, size_t size) {
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return sysError("mmap of " + std::to_string(size) + " bytes");
  return static_cast<std::byte*>(p);
}

}  // namespace

ShmRegion::~ShmRegion() {
  unmap();
}

ShmRegion::ShmRegion(ShmRegion&& other) noexcept
    : fd_(std::move(other.fd_)),
      base_(std::exchange(other.base_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

ShmRegion& ShmRegion::operator=(ShmRegion&& other) noexcept {
  if (this != &other) {
    unmap();
    fd_ = std::move(other.fd_);
    base_ = std::exchange(other.base_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void ShmRegion::unmap() {
  if (base_ != nullptr) ::munmap(base_, size_);
  base_ = nullptr;
  size_ = 0;
}

Result<ShmRegion> ShmRegion::create(const std::string& name, size_t size) {
  if (size == 0) return Status(Errc::bad_request, "a shared-memory region needs a size");
  UniqueFd fd(::memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd) return sysError("memfd_create " + name);
  if (::ftruncate(fd.get(), static_cast<off_t>(size)) != 0) return sysError("ftruncate " + name);
  if (::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    return sysError("sealing " + name);
  }
  Result<std::byte*> base = mapShared(fd.get(), size);
  if (!base) return base.status();
  return ShmRegion(std::move(fd), base.value(), size);
}

Result<size_t> ShmRegion::fileSize(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return sysError("fstat of the shared-memory fd");
  if (st.st_size < 0) return Status(Errc::protocol_error, "the shared-memory fd has no size");
  return static_cast<size_t>(st.st_size);
}

Result<ShmRegion> ShmRegion::attach(UniqueFd fd, size_t expectedSize) {
  if (!fd) return Status(Errc::bad_request, "no shared-memory fd to attach");
  const int seals = ::fcntl(fd.get(), F_GET_SEALS);
  if (seals < 0) {
    return Status(Errc::protocol_error,
                  std::string("the shared-memory fd cannot be sealed (not a memfd?): ") +
                      std::strerror(errno));
  }
  if ((seals & F_SEAL_SHRINK) == 0) {
    return Status(Errc::protocol_error, "the shared-memory fd is not sealed against shrinking");
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return sysError("fstat of the shared-memory fd");
  if (st.st_size < 0 || static_cast<size_t>(st.st_size) != expectedSize || expectedSize == 0) {
    return Status(Errc::protocol_error, "the shared-memory fd holds " + std::to_string(st.st_size) +
                                            " bytes, expected " + std::to_string(expectedSize));
  }
  Result<std::byte*> base = mapShared(fd.get(), expectedSize);
  if (!base) return base.status();
  return ShmRegion(std::move(fd), base.value(), expectedSize);
}

}  // namespace rdmamsg
