// `rdmamsg send` reads one message per line and `rdmamsg listen` writes one
// line per message: lines across block boundaries, lines longer than a
// block, a last line without a newline, and write errors.
#include "client/cli/line_io.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <string>
#include <thread>
#include <vector>

namespace rdmamsg::cli {
namespace {

struct Pipe {
  int r = -1, w = -1;
  Pipe() {
    int fds[2];
    EXPECT_EQ(::pipe2(fds, O_CLOEXEC), 0);
    r = fds[0];
    w = fds[1];
  }
  ~Pipe() {
    closeRead();
    closeWrite();
  }
  void closeRead() {
    if (r >= 0) ::close(r);
    r = -1;
  }
  void closeWrite() {
    if (w >= 0) ::close(w);
    w = -1;
  }
};

// Feeds `text` into a pipe from a thread and reads it back with a LineReader.
std::vector<std::string> readLines(const std::string& text, size_t block) {
  Pipe p;
  std::thread writer([&] {
    size_t off = 0;
    while (off < text.size()) {
      const ssize_t n = ::write(p.w, text.data() + off, std::min<size_t>(text.size() - off, 1000));
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    p.closeWrite();
  });
  std::vector<std::string> lines;
  LineReader in(p.r, block);
  std::string_view line;
  while (in.next(line))
    lines.emplace_back(line);
  writer.join();
  EXPECT_EQ(in.error(), 0);
  return lines;
}

TEST(LineIoTest, ReaderSplitsLinesAcrossBlocksAndKeepsEmptyLines) {
  std::string text;
  std::vector<std::string> want;
  for (int i = 0; i < 5000; ++i) {
    want.push_back(i % 7 == 0 ? "" : "line " + std::to_string(i));
    text += want.back() + "\n";
  }
  EXPECT_EQ(readLines(text, 64), want);
}

TEST(LineIoTest, ReaderGrowsForLinesLongerThanABlock) {
  const std::string big(100000, 'x');
  const std::vector<std::string> want{"a", big, "b"};
  EXPECT_EQ(readLines("a\n" + big + "\nb\n", 4096), want);
}

TEST(LineIoTest, ReaderReturnsALastLineWithoutNewline) {
  const std::vector<std::string> want{"first", "last"};
  EXPECT_EQ(readLines("first\nlast", 8), want);
  EXPECT_TRUE(readLines("", 8).empty());
}

TEST(LineIoTest, WriterAppendsNewlinesAndFlushesInBlocks) {
  Pipe p;
  std::string got;
  std::thread reader([&] {
    char buf[4096];
    ssize_t n;
    while ((n = ::read(p.r, buf, sizeof buf)) > 0)
      got.append(buf, static_cast<size_t>(n));
  });
  std::string want;
  {
    LineWriter out(p.w, 100);
    for (int i = 0; i < 1000; ++i) {
      const std::string line = i == 500 ? std::string(1000, 'y') : std::to_string(i);
      ASSERT_TRUE(out.write(line));
      want += line + "\n";
    }
    ASSERT_TRUE(out.flush());
  }
  p.closeWrite();
  reader.join();
  EXPECT_EQ(got, want);
}

TEST(LineIoTest, WriterReportsAClosedReader) {
  std::signal(SIGPIPE, SIG_IGN);  // as for any writer: EPIPE instead of the signal
  Pipe p;
  p.closeRead();
  LineWriter out(p.w, 64);
  EXPECT_TRUE(out.write("buffered"));
  EXPECT_FALSE(out.flush());
  EXPECT_EQ(out.error(), EPIPE);
  EXPECT_FALSE(out.write("more"));
  std::signal(SIGPIPE, SIG_DFL);
}

}  // namespace
}  // namespace rdmamsg::cli
