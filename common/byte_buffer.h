// ByteBuffer: a growable byte queue used for socket input and output.
//
// Bytes are appended at the back (append / prepare+commit) and consumed from
// the front (consume). Storage is reused: consumed space is reclaimed by
// moving the unread bytes to the front when that is cheap, so a buffer that
// has reached its working size never allocates again.
//
// pin() keeps every byte already in the buffer where it is until unpin() —
// for a reader that hands out views of bytes it consumed (librdmamsg's
// receiveView). Meanwhile consumed space is not reused: when the back has
// no room, the unread bytes move to other storage and the pinned storage is
// set aside until unpin(), which keeps it as the spare for the next time.
//
// Growing is cheap at any size. Storage is never zero-filled, and from 1 MiB
// on it is mapped memory that grows in place (mremap moves the pages, not the
// bytes): a daemon's output to a client that reads nothing, which may reach
// the sum of its flows' windows (hundreds of MiB), is written once when it is
// appended — not again at each doubling, and not cleared first, which cost a
// daemon's one thread seconds at that size.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <new>
#include <span>
#include <string_view>
#include <utility>

#include <sys/mman.h>

namespace rdmamsg {

class ByteBuffer {
 public:
  ByteBuffer() = default;
  explicit ByteBuffer(size_t capacity) : storage_(capacity) {}

  // Unread bytes.
  std::span<const std::byte> readable() const { return {storage_.data() + begin_, end_ - begin_}; }
  const std::byte* data() const { return storage_.data() + begin_; }
  size_t size() const { return end_ - begin_; }
  bool empty() const { return begin_ == end_; }
  size_t capacity() const { return storage_.size(); }

  // Drops `n` bytes from the front (n <= size()).
  void consume(size_t n) {
    begin_ += n;
    if (begin_ == end_ && !pinnedHere()) begin_ = end_ = 0;
  }

  void clear() { begin_ = end_ = pinnedHere() ? end_ : 0; }

  // Bytes in the buffer (also consumed ones) stay where they are until unpin().
  void pin() { pinned_ = true; }
  void unpin() {
    pinned_ = false;
    if (!setAside_.empty()) spare_.swap(setAside_);  // spare_ was empty
    if (begin_ == end_) begin_ = end_ = 0;
  }

  // Returns at least `n` writable bytes after the unread data; commit() the
  // number actually written.
  std::span<std::byte> prepare(size_t n) {
    if (storage_.size() - end_ < n) makeRoom(n);
    return {storage_.data() + end_, storage_.size() - end_};
  }
  void commit(size_t n) { end_ += n; }

  void append(const void* bytes, size_t n) {
    if (n == 0) return;
    std::memcpy(prepare(n).data(), bytes, n);
    end_ += n;
  }
  void append(std::span<const std::byte> bytes) { append(bytes.data(), bytes.size()); }
  void append(std::string_view text) { append(text.data(), text.size()); }

  // Overwrites already-appended bytes at `offset` from the front (used to
  // patch a length field once a frame is complete).
  void overwrite(size_t offset, const void* bytes, size_t n) {
    std::memcpy(storage_.data() + begin_ + offset, bytes, n);
  }

 private:
  // The current storage holds pinned bytes (none were set aside yet).
  bool pinnedHere() const { return pinned_ && setAside_.empty(); }

  void makeRoom(size_t n) {
    const size_t used = end_ - begin_;
    if (pinnedHere()) {
      moveToSpare(used + n);
      return;
    }
    if (begin_ > 0 && storage_.size() - used >= n && begin_ >= used) {
      std::memmove(storage_.data(), storage_.data() + begin_, used);  // cheap: little to move
    } else if (storage_.mapped()) {
      storage_.grow(std::max(storage_.size() * 2, end_ + n));  // the bytes stay where they are
      return;
    } else {
      Storage bigger(std::max({storage_.size() * 2, used + n, kMinCapacity}));
      if (used > 0) std::memcpy(bigger.data(), storage_.data() + begin_, used);
      storage_.swap(bigger);
    }
    begin_ = 0;
    end_ = used;
  }

  // Pinned: the unread bytes go to the spare storage (grown to `need` if
  // smaller); the pinned storage is set aside.
  void moveToSpare(size_t need) {
    const size_t used = end_ - begin_;
    if (spare_.size() < need) spare_ = Storage(std::max({storage_.size(), need, kMinCapacity}));
    if (used > 0) std::memcpy(spare_.data(), storage_.data() + begin_, used);
    setAside_.swap(storage_);
    storage_.swap(spare_);
    begin_ = 0;
    end_ = used;
  }

  // Bytes that are not initialised (every byte is written before it is
  // read): allocated below kMapAt, mapped from there on.
  class Storage {
   public:
    static constexpr size_t kMapAt = size_t{1} << 20;

    Storage() = default;
    explicit Storage(size_t n) : size_(n), mapped_(n >= kMapAt) {
      if (n == 0) return;
      if (!mapped_) {
        bytes_ = new std::byte[n];
        return;
      }
      void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) throw std::bad_alloc();
      bytes_ = static_cast<std::byte*>(p);
    }
    Storage(Storage&& o) noexcept { swap(o); }
    Storage& operator=(Storage&& o) noexcept {
      Storage(std::move(o)).swap(*this);
      return *this;
    }
    Storage(const Storage& o) : Storage(o.size_) {
      if (size_ > 0) std::memcpy(bytes_, o.bytes_, size_);
    }
    Storage& operator=(const Storage& o) {
      if (this != &o) Storage(o).swap(*this);
      return *this;
    }
    ~Storage() {
      if (mapped_)
        ::munmap(bytes_, size_);
      else
        delete[] bytes_;
    }

    std::byte* data() { return bytes_; }
    const std::byte* data() const { return bytes_; }
    size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }
    bool mapped() const { return mapped_; }

    // Mapped storage grown to n bytes, every byte where it was.
    void grow(size_t n) {
      void* p = ::mremap(bytes_, size_, n, MREMAP_MAYMOVE);
      if (p == MAP_FAILED) throw std::bad_alloc();
      bytes_ = static_cast<std::byte*>(p);
      size_ = n;
    }

    void swap(Storage& o) noexcept {
      std::swap(bytes_, o.bytes_);
      std::swap(size_, o.size_);
      std::swap(mapped_, o.mapped_);
    }

   private:
    std::byte* bytes_ = nullptr;
    size_t size_ = 0;
    bool mapped_ = false;
  };

  static constexpr size_t kMinCapacity = 4096;
  Storage storage_;
  Storage spare_;     // reused by moveToSpare()
  Storage setAside_;  // the pinned storage, once moved away from
  bool pinned_ = false;
  size_t begin_ = 0;
  size_t end_ = 0;
};

}  // namespace rdmamsg
