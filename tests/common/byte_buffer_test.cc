// ByteBuffer: FIFO semantics and storage reuse.
#include "common/byte_buffer.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace rdmamsg
