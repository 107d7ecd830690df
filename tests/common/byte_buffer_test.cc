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

}  // namespace
}  // namespace rdmamsg
