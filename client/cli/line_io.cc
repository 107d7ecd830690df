// Block-buffered line input and output (line_io.h).
#include "client/cli/line_io.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace rdmamsg::cli {

LineReader::LineReader(int fd, size_t block) : fd_(fd), block_(block), buf_(block) {}

bool LineReader::next(std::string_view& line) {
  for (;;) {
    const char* base = buf_.data();
    if (const void* nl = std::memchr(base + scanned_, '\n', end_ - scanned_)) {
      const auto at = static_cast<size_t>(static_cast<const char*>(nl) - base);
      line = std::string_view(base + start_, at - start_);
      start_ = scanned_ = at + 1;
      return true;
    }
    scanned_ = end_;
    if (!eof_ && error_ == 0 && fill()) continue;
    if (start_ == end_ || error_ != 0) return false;
    line = std::string_view(base + start_, end_ - start_);  // the last line, no '\n'
    start_ = scanned_ = end_;
    return true;
  }
}

bool LineReader::fill() {
  // Keep the unread part of the current line at the front, with a block of room.
  if (start_ > 0) {
    std::memmove(buf_.data(), buf_.data() + start_, end_ - start_);
    end_ -= start_;
    scanned_ -= start_;
    start_ = 0;
  }
  if (buf_.size() - end_ < block_ / 2) buf_.resize(std::max(buf_.size() * 2, end_ + block_));
  for (;;) {
    const ssize_t n = ::read(fd_, buf_.data() + end_, buf_.size() - end_);
    if (n > 0) {
      end_ += static_cast<size_t>(n);
      return true;
    }
    if (n == 0) {
      eof_ = true;
      return false;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      pollfd p{fd_, POLLIN, 0};
      ::poll(&p, 1, -1);
      continue;
    }
    error_ = errno;
    return false;
  }
}

LineWriter::LineWriter(int fd, size_t block) : fd_(fd), buf_(block) {}

LineWriter::~LineWriter() {
  flush();
}

bool LineWriter::write(std::string_view line) {
  if (error_ != 0) return false;
  if (line.size() + 1 > buf_.size() - used_) {
    if (!flush()) return false;
    if (line.size() + 1 > buf_.size()) {  // larger than a block: straight out
      return writeAll(line.data(), line.size()) && writeAll("\n", 1);
    }
  }
  std::memcpy(buf_.data() + used_, line.data(), line.size());
  used_ += line.size();
  buf_[used_++] = '\n';
  return true;
}

bool LineWriter::flush() {
  if (error_ != 0) return false;
  const size_t n = used_;
  used_ = 0;
  return writeAll(buf_.data(), n);
}

bool LineWriter::writeAll(const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd_, p, n);
    if (w >= 0) {
      p += w;
      n -= static_cast<size_t>(w);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      pollfd pfd{fd_, POLLOUT, 0};
      ::poll(&pfd, 1, -1);
    } else if (errno != EINTR) {
      error_ = errno;
      return false;
    }
  }
  return true;
}

}  // namespace rdmamsg::cli
