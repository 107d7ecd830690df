// ShmRegion, fd passing and ShmDoorbell: a sealed memfd and an eventfd cross
// a Unix socket and work on the other side; a region that could shrink, one
// of another size, an fd that is not an eventfd and fds beyond what the
// receiver allows are refused, and nothing leaks.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <filesystem>
#include <string_view>

#include "common/fd_passing.h"
#include "common/shm_doorbell.h"
#include "common/shm_region.h"

namespace rdmamsg {
namespace {

struct SocketPair {
  SocketPair() {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) std::abort();
    a.reset(fds[0]);
    b.reset(fds[1]);
  }
  UniqueFd a, b;
};

size_t openFds() {
  return static_cast<size_t>(std::distance(std::filesystem::directory_iterator("/proc/self/fd"),
                                           std::filesystem::directory_iterator{}));
}

std::span<const std::byte> bytesOf(std::string_view s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

TEST(ShmRegionTest, RegionAndDoorbellCrossASocket) {
  ShmRegion region = ShmRegion::create("test", 8192).value();
  ShmDoorbell bell = ShmDoorbell::create().value();
  SocketPair s;
  const std::array<int, 2> fds{region.fd(), bell.fd()};
  ASSERT_EQ(sendFds(s.a.get(), fds, bytesOf("ring")).value(), 4u);

  std::array<std::byte, 16> buf{};
  ReceivedFds got = receiveFds(s.b.get(), buf, 2).value();
  ASSERT_EQ(got.bytes, 4u);
  ASSERT_EQ(got.fds.size(), 2u);
  EXPECT_EQ(::fcntl(got.fds[0].get(), F_GETFD), FD_CLOEXEC) << "received close-on-exec";
  ShmRegion theirs = ShmRegion::attach(std::move(got.fds[0]), 8192).value();
  ShmDoorbell theirBell = ShmDoorbell::adopt(std::move(got.fds[1])).value();

  region.bytes()[5000] = std::byte{42};
  EXPECT_EQ(theirs.bytes()[5000], std::byte{42}) << "the same memory";
  EXPECT_FALSE(theirBell.drain().value());
  ASSERT_TRUE(bell.ring().ok());
  EXPECT_TRUE(theirBell.drain().value());
  EXPECT_EQ(bell.rings(), 1u);
}

TEST(ShmRegionTest, ACreatedRegionCannotShrinkOrGrow) {
  ShmRegion region = ShmRegion::create("test", 4096).value();
  EXPECT_NE(::ftruncate(region.fd(), 0), 0);
  EXPECT_NE(::ftruncate(region.fd(), 8192), 0);
  EXPECT_NE(::fcntl(region.fd(), F_ADD_SEALS, F_SEAL_WRITE), 0) << "sealed against more seals";
}

TEST(ShmRegionTest, AnUnsealedRegionIsRefused) {
  UniqueFd fd(::memfd_create("unsealed", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  ASSERT_TRUE(fd);
  ASSERT_EQ(::ftruncate(fd.get(), 4096), 0);
  ASSERT_EQ(::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_GROW), 0) << "sealed, but not against shrinking";
  Result<ShmRegion> r = ShmRegion::attach(std::move(fd), 4096);
  EXPECT_EQ(r.status().code(), Errc::protocol_error);
  EXPECT_EQ(r.status().message(), "the shared-memory fd is not sealed against shrinking");

  int pipeFds[2];
  ASSERT_EQ(::pipe2(pipeFds, O_CLOEXEC), 0);
  UniqueFd writeEnd(pipeFds[1]);
  EXPECT_EQ(ShmRegion::attach(UniqueFd(pipeFds[0]), 4096).status().code(), Errc::protocol_error)
      << "not a memfd";
}

TEST(ShmRegionTest, ARegionOfAnotherSizeIsRefused) {
  ShmRegion region = ShmRegion::create("test", 4096).value();
  Result<ShmRegion> r = ShmRegion::attach(UniqueFd(::dup(region.fd())), 8192);
  EXPECT_EQ(r.status().code(), Errc::protocol_error);
  EXPECT_EQ(r.status().message(), "the shared-memory fd holds 4096 bytes, expected 8192");
}

TEST(ShmRegionTest, ADoorbellThatIsNotAnEventfdIsRefused) {
  ShmRegion region = ShmRegion::create("test", 4096).value();
  EXPECT_EQ(ShmDoorbell::adopt(UniqueFd(::dup(region.fd()))).status().code(), Errc::protocol_error);
}

TEST(ShmRegionTest, FdsBeyondWhatTheReceiverAllowsAreRefusedAndClosed) {
  for (size_t sent : {2u, 3u, 5u}) {
    SocketPair s;
    const size_t before = openFds();
    std::vector<int> fds;
    for (size_t i = 0; i < sent; ++i)
      fds.push_back(::dup(s.a.get()));
    ASSERT_TRUE(sendFds(s.a.get(), fds, bytesOf("x")).ok());
    for (int fd : fds)
      ::close(fd);
    std::array<std::byte, 4> buf{};
    Result<ReceivedFds> got = receiveFds(s.b.get(), buf, 1);
    EXPECT_EQ(got.status().code(), Errc::protocol_error) << sent << " fds";
    EXPECT_EQ(openFds(), before) << "every fd received was closed";
  }
}

TEST(ShmRegionTest, ReceivingFromAnEmptySocketWouldBlock) {
  SocketPair s;
  ASSERT_EQ(::fcntl(s.b.get(), F_SETFL, O_NONBLOCK), 0);
  std::array<std::byte, 4> buf{};
  EXPECT_EQ(receiveFds(s.b.get(), buf, 2).status().code(), Errc::would_block);
  s.a.reset();
  EXPECT_EQ(receiveFds(s.b.get(), buf, 2).value().bytes, 0u) << "the peer closed";
}

}  // namespace
}  // namespace rdmamsg
