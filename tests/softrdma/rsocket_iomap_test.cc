// riomap, riowrite and riounmap on softrdma's rsockets: data written into the peer's mapped
// window lands there without the peer calling anything, before anything sent after it is
// received; the errors of rsocket(7) and librdmacm for bad mappings.
#include <rdma/rsocket.h>
#include <sys/mman.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <vector>

#include "../support/wait.h"
#include "rsocket_support.h"
#include "support.h"

namespace rdmamsg::test {
namespace {

void allowMappings(int fd) {
  int one = 1;
  ASSERT_EQ(rsetsockopt(fd, SOL_RDMA, RDMA_IOMAPSIZE, &one, sizeof one), 0);
}

// The window's last byte, read as riostream's receiver does (no rsocket call).
uint8_t lastByte(const std::vector<uint8_t>& w) {
  return std::atomic_ref<const uint8_t>(w.back()).load();
}

TEST(RsocketIomap, WritesLandInTheWindowWithoutTheReceiverCalling) {
  RsPair p;
  ASSERT_TRUE(p.listen(allowMappings));  // the server accepts one mapping of the client's
  ASSERT_TRUE(p.connect(allowMappings));
  std::vector<uint8_t> window(8192, 0);
  off_t off = riomap(p.server, window.data(), window.size(), PROT_WRITE, 0, 4096);
  ASSERT_EQ(off, 4096);
  // Any transfer after riomap carries the mapping to the peer.
  ASSERT_EQ(rsend(p.server, "m", 1, 0), 1);
  char c;
  ASSERT_EQ(rrecv(p.client, &c, 1, MSG_WAITALL), 1);

  std::vector<uint8_t> data(window.size());
  for (size_t i = 0; i < data.size(); i++)
    data[i] = uint8_t(i * 7 + 1);
  data.back() = 0xee;
  ASSERT_EQ(riowrite(p.client, data.data(), data.size(), off, 0), data.size());
  ASSERT_TRUE(waitFor([&] { return lastByte(window) == 0xee; }, kDeadline));
  EXPECT_EQ(window, data);
  ASSERT_EQ(riounmap(p.server, window.data(), window.size()), 0);
}

TEST(RsocketIomap, WriteLandsBeforeTheMessageSentAfterIt) {
  RsPair p;
  ASSERT_TRUE(p.listen(allowMappings));
  ASSERT_TRUE(p.connect(allowMappings));
  constexpr size_t kRegion = 3000, kRegions = 40;
  std::vector<uint8_t> window(kRegion * kRegions, 0);
  off_t off = riomap(p.server, window.data(), window.size(), PROT_WRITE, 0, -1);
  ASSERT_EQ(off, off_t(reinterpret_cast<uintptr_t>(window.data())));  // -1: the address
  ASSERT_EQ(rsend(p.server, "m", 1, 0), 1);
  char c;
  ASSERT_EQ(rrecv(p.client, &c, 1, MSG_WAITALL), 1);

  std::vector<uint8_t> data(kRegion);
  for (size_t r = 0; r < kRegions; r++) {
    memset(data.data(), int(r + 1), data.size());
    ASSERT_EQ(riowrite(p.client, data.data(), data.size(), off + off_t(r * kRegion), 0), kRegion);
    uint8_t idx = uint8_t(r);
    ASSERT_EQ(rsend(p.client, &idx, 1, 0), 1);
  }
  for (size_t r = 0; r < kRegions; r++) {
    uint8_t idx = 0xff;
    ASSERT_EQ(rrecv(p.server, &idx, 1, MSG_WAITALL), 1);
    ASSERT_EQ(idx, r);
    // Region r is complete when the message sent after its write is received.
    EXPECT_EQ(std::vector<uint8_t>(window.begin() + long(r * kRegion),
                                   window.begin() + long((r + 1) * kRegion)),
              std::vector<uint8_t>(kRegion, uint8_t(r + 1)))
        << "region " << r;
  }
}

TEST(RsocketIomap, WritesStopAtTheEndOfTheWindow) {
  RsPair p;
  ASSERT_TRUE(p.listen(allowMappings));
  ASSERT_TRUE(p.connect(allowMappings));
  std::vector<uint8_t> window(100, 0);
  ASSERT_EQ(riomap(p.server, window.data(), window.size(), PROT_WRITE, 0, 0), 0);
  ASSERT_EQ(rsend(p.server, "m", 1, 0), 1);
  char c;
  ASSERT_EQ(rrecv(p.client, &c, 1, MSG_WAITALL), 1);
  std::vector<uint8_t> data(300, 9);
  EXPECT_EQ(riowrite(p.client, data.data(), data.size(), 50, 0), 50u);  // up to the end
  EXPECT_EQ(riowrite(p.client, data.data(), data.size(), 100, 0), 0u);  // librdmacm: nothing
  ASSERT_EQ(rsend(p.client, "z", 1, 0), 1);
  ASSERT_EQ(rrecv(p.server, &c, 1, MSG_WAITALL), 1);
  EXPECT_EQ(std::vector<uint8_t>(window.begin(), window.begin() + 50), std::vector<uint8_t>(50, 0));
  EXPECT_EQ(std::vector<uint8_t>(window.begin() + 50, window.end()), std::vector<uint8_t>(50, 9));
}

TEST(RsocketIomap, BadMappingsFail) {
  std::vector<uint8_t> buf(64);
  int s = rsocket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(s, 0);
  EXPECT_EQ(riomap(s, buf.data(), buf.size(), PROT_WRITE, 0, -1), -1);  // not connected
  EXPECT_EQ(errno, EINVAL);
  rclose(s);
  EXPECT_EQ(riomap(s, buf.data(), buf.size(), PROT_WRITE, 0, -1), -1);
  EXPECT_EQ(errno, EBADF);

  RsPair p;  // no RDMA_IOMAPSIZE: the peer takes no mapping
  ASSERT_TRUE(p.connect());
  EXPECT_EQ(riomap(p.server, buf.data(), buf.size(), PROT_WRITE, 0, -1), -1);
  EXPECT_EQ(errno, ENOMEM);
  EXPECT_EQ(riomap(p.server, buf.data(), buf.size(), PROT_READ, 0, -1), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(riomap(p.server, buf.data(), buf.size(), PROT_NONE, 0, 0), 0);  // local only
  EXPECT_EQ(riounmap(p.server, buf.data(), 32), -1);  // not a mapping: length differs
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(riounmap(p.server, buf.data(), buf.size()), 0);
  EXPECT_EQ(riowrite(p.client, buf.data(), buf.size(), 0, 0), 0u);  // no window announced

  RsPair q;
  ASSERT_TRUE(q.listen(allowMappings));
  ASSERT_TRUE(q.connect());
  std::vector<uint8_t> other(64);
  EXPECT_EQ(riomap(q.client, buf.data(), buf.size(), PROT_WRITE, 0, 0), 0);
  EXPECT_EQ(riomap(q.client, other.data(), other.size(), PROT_WRITE, 0, 64), -1);  // one slot
  EXPECT_EQ(errno, ENOMEM);
}

}  // namespace
}  // namespace rdmamsg::test
