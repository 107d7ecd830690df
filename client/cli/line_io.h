// Line-oriented standard I/O for `rdmamsg send` (one message per input line)
// and `rdmamsg listen` (one line per message), in large blocks: a line costs
// a memchr or a memcpy, not a stdio call.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

namespace rdmamsg::cli {

// Reads lines from a file descriptor. A line longer than the block grows the
// buffer (lines are messages: up to the maximum message size).
class LineReader {
 public:
  explicit LineReader(int fd, size_t block = size_t{1} << 20);

  // The next line without its '\n' (a last line without one is returned
  // too). The view is valid until the next call. False at the end of the
  // input or on a read error (then error() is the errno).
  bool next(std::string_view& line);
  int error() const { return error_; }

 private:
  bool fill();  // reads more after the unread bytes; false at EOF or on error

  int fd_;
  size_t block_;
  std::vector<char> buf_;
  size_t start_ = 0, end_ = 0, scanned_ = 0;
  bool eof_ = false;
  int error_ = 0;
};

// Writes lines to a file descriptor, buffered into blocks; waits (poll) if
// the descriptor is nonblocking and full.
class LineWriter {
 public:
  explicit LineWriter(int fd, size_t block = size_t{256} << 10);
  ~LineWriter();  // flushes what is buffered (errors are up to flush())

  // Appends `line` and a '\n'. False once a write failed (error() is the errno).
  bool write(std::string_view line);
  // Writes everything buffered.
  bool flush();
  int error() const { return error_; }

 private:
  bool writeAll(const char* p, size_t n);

  int fd_;
  std::vector<char> buf_;
  size_t used_ = 0;
  int error_ = 0;
};

}  // namespace rdmamsg::cli
