// ByteBuffer: FIFO semantics and storage reuse.
#include "common/byte_buffer.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <string>

namespace rdmamsg {
namespace {

std::string text(const ByteBuffer& b) {
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

TEST(ByteBufferTest, AppendConsumeKeepsOrder) {
  ByteBuffer b;
  b.append(std::string_view("hello "));
  b.append(std::string_view("world"));
  EXPECT_EQ(text(b), "hello world");
  b.consume(6);
  EXPECT_EQ(text(b), "world");
  b.consume(5);
  EXPECT_TRUE(b.empty());
}

TEST(ByteBufferTest, PrepareCommit) {
  ByteBuffer b;
  auto room = b.prepare(3);
  ASSERT_GE(room.size(), 3u);
  room[0] = std::byte{'a'};
  room[1] = std::byte{'b'};
  b.commit(2);
  EXPECT_EQ(text(b), "ab");
}

TEST(ByteBufferTest, SteadyStateDoesNotGrow) {
  ByteBuffer b(1024);
  const std::string chunk(100, 'x');
  for (int i = 0; i < 10000; ++i) {
    b.append(std::string_view(chunk));
    if (b.size() > 500) b.consume(b.size() - 50);
  }
  EXPECT_LE(b.capacity(), 4096u);
}

// A pinned buffer keeps every byte where it is — also consumed ones, which a
// reader hands out as views — while it goes on taking bytes: when the back
// is full, the unread bytes move to other storage. After unpin() the two
// storages alternate: a reader pinning again and again does not grow.
TEST(ByteBufferTest, PinnedBytesStayWhereTheyAre) {
  ByteBuffer b(1024);
  b.append(std::string_view("held message|rest"));
  const std::byte* held = b.data();
  b.consume(12);
  b.pin();
  const std::string chunk(300, 'y');
  for (int i = 0; i < 20; ++i) {
    b.append(std::string_view(chunk));
    b.consume(b.size() > 400 ? 200 : 0);
  }
  b.clear();
  b.append(std::string_view("after"));
  EXPECT_EQ(std::string_view(reinterpret_cast<const char*>(held), 12), "held message");
  EXPECT_EQ(text(b), "after");
  b.unpin();
  for (int round = 0; round < 1000; ++round) {
    b.pin();
    for (int i = 0; i < 8; ++i)
      b.append(std::string_view(chunk));
    b.consume(b.size());
    b.unpin();
  }
  EXPECT_LE(b.capacity(), 8192u);
}

// Past the size where storage is mapped and grows in place, the unread
// bytes stay in order whatever was consumed before the growth.
TEST(ByteBufferTest, UnreadBytesSurviveGrowthAtEverySize) {
  ByteBuffer b;
  std::string model;
  size_t chunk = 1000;
  for (int round = 0; round < 24; ++round) {  // up to about 17 MB a piece
    std::string piece(chunk, static_cast<char>('a' + round % 26));
    piece.front() = '<';
    piece.back() = '>';
    b.append(std::string_view(piece));
    model += piece;
    const size_t drop = model.size() / 3;  // unread bytes left in front of the growth
    b.consume(drop);
    model.erase(0, drop);
    ASSERT_EQ(b.size(), model.size());
    chunk = chunk * 3 / 2;
  }
  EXPECT_GT(b.capacity(), size_t{8} << 20);
  EXPECT_TRUE(text(b) == model);
}

// Resident memory of this process, in bytes (0 if /proc cannot say).
size_t residentBytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long size = 0, resident = 0;
  const int got = std::fscanf(f, "%lu %lu", &size, &resident);
  std::fclose(f);
  return got == 2 ? resident * static_cast<size_t>(sysconf(_SC_PAGESIZE)) : 0;
}

// Growing to hundreds of MiB (a daemon's output to a client that reads
// nothing, up to its flows' windows) touches the bytes the buffer holds, not
// its whole new capacity: clearing it first cost a daemon seconds of its one
// thread, long enough for its peers to give it up.
TEST(ByteBufferTest, GrowingTouchesOnlyTheBytesItHolds) {
  const size_t before = residentBytes();
  ASSERT_GT(before, 0u);
  ByteBuffer b;
  b.append(std::string_view("front"));
  constexpr size_t kHuge = size_t{512} << 20;
  auto room = b.prepare(kHuge);
  ASSERT_GE(room.size(), kHuge);
  room[kHuge - 1] = std::byte{'z'};  // all of it is there to be written
  EXPECT_EQ(text(b), "front");
  EXPECT_LT(residentBytes(), before + (kHuge / 4)) << "resident before: " << before;
}

}  // namespace
}  // namespace rdmamsg
