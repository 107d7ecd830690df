// Device attributes and calls as real providers answer them (issue 24): a non-zero vendor id,
// the same on every query; ibv_query_gid_table refusing a buffer too small; the GID table's
// empty entry (rxe's table has them); libibverbs'
// ibv_query_gid_type answered for softrdma's context; rdma_join_multicast refused
// on an id past address resolution; RDMA_OPTION_ID_ACK_TIMEOUT becoming the QP's timeout.
#include <cerrno>
#include <cstring>

#include "support.h"

// libibverbs' private helper (driver.h); the type is enum ibv_gid_type_sysfs.
extern "C" int ibv_query_gid_type(ibv_context* context, uint8_t port, unsigned int index,
                                  int* type);

namespace rdmamsg::test {
namespace {

struct Device : ::testing::Test {
  void SetUp() override {
    ctx = openFirstDevice();
    ASSERT_NE(nullptr, ctx);
  }
  void TearDown() override {
    if (ctx != nullptr) {
      EXPECT_EQ(0, ibv_close_device(ctx));
    }
  }
  ibv_context* ctx = nullptr;
};

TEST_F(Device, VendorIdsAreNonZeroAndTheSameOnEveryContext) {
  ibv_device_attr a{}, b{};
  ASSERT_EQ(0, ibv_query_device(ctx, &a));
  ibv_context* other = openFirstDevice();
  ASSERT_NE(nullptr, other);
  ASSERT_EQ(0, ibv_query_device(other, &b));
  EXPECT_EQ(0, ibv_close_device(other));
  EXPECT_NE(0u, a.vendor_id);
  EXPECT_NE(0u, a.vendor_part_id);
  EXPECT_EQ(a.vendor_id, b.vendor_id);
  EXPECT_EQ(a.vendor_part_id, b.vendor_part_id);
}

TEST_F(Device, GidTableTooSmallIsEinvalAndLargeEnoughIsFilled) {
  ibv_gid_entry entries[64]{};
  const ssize_t n = ibv_query_gid_table(ctx, entries, 64, 0);
  ASSERT_GE(n, 1);
  EXPECT_EQ(-EINVAL, ibv_query_gid_table(ctx, entries, static_cast<size_t>(n - 1), 0));
  EXPECT_EQ(n, ibv_query_gid_table(ctx, entries, static_cast<size_t>(n), 0));
  EXPECT_EQ(IBV_GID_TYPE_ROCE_V2, entries[0].gid_type);
}

TEST_F(Device, GidTableEndsWithAnEmptyEntryAsRxes) {
  ibv_gid_entry entries[64]{};
  const ssize_t n = ibv_query_gid_table(ctx, entries, 64, 0);
  ASSERT_GE(n, 1);
  ibv_port_attr port{};
  ASSERT_EQ(0, ibv_query_port(ctx, 1, &port));
  ASSERT_EQ(n + 1, port.gid_tbl_len) << "the valid entries and one empty";
  const auto empty = static_cast<uint32_t>(n);
  ibv_gid gid;
  memset(&gid, 0xaa, sizeof gid);
  ASSERT_EQ(0, ibv_query_gid(ctx, 1, static_cast<int>(empty), &gid)) << "libibverbs' answer";
  const ibv_gid zero{};
  EXPECT_EQ(0, memcmp(&zero, &gid, sizeof gid));
  ibv_gid_entry entry{};
  EXPECT_EQ(ENODATA, ibv_query_gid_ex(ctx, 1, empty, &entry, 0));
  int type = -1;
  EXPECT_EQ(0, ibv_query_gid_type(ctx, 1, empty, &type));
  EXPECT_EQ(0, type);  // IBV_GID_TYPE_SYSFS_IB_ROCE_V1, libibverbs' answer for an empty GID
  EXPECT_EQ(-1, ibv_query_gid(ctx, 1, static_cast<int>(empty) + 1, &gid));
  EXPECT_EQ(EINVAL, ibv_query_gid_ex(ctx, 1, empty + 1, &entry, 0));
  EXPECT_EQ(0, ibv_query_gid_ex(ctx, 1, empty - 1, &entry, 0));
  EXPECT_EQ(empty - 1, entry.gid_index);
}

TEST_F(Device, QueryGidTypeAnswersRoceV2ForEveryEntry) {
  int type = -1;
  ASSERT_EQ(0, ibv_query_gid_type(ctx, 1, 0, &type));
  EXPECT_EQ(1, type);  // IBV_GID_TYPE_SYSFS_ROCE_V2
  EXPECT_EQ(EINVAL, ibv_query_gid_type(ctx, 1, 1u << 20, &type));
  EXPECT_EQ(EINVAL, ibv_query_gid_type(ctx, 2, 0, &type));
}

class CmOptions : public CmFixture {};

TEST_F(CmOptions, MulticastNeedsAnIdThatIsOnlyBoundOrResolved) {
  ASSERT_NO_FATAL_FAILURE(resolveClient());
  sockaddr_in group = ipv4("239.1.1.1", 0);
  errno = 0;
  EXPECT_EQ(-1, rdma_join_multicast(client_.id, reinterpret_cast<sockaddr*>(&group), nullptr))
      << "the route is resolved already (the kernel's rdma_join_multicast)";
  EXPECT_EQ(EINVAL, errno);
  errno = 0;
  EXPECT_EQ(-1, rdma_leave_multicast(client_.id, reinterpret_cast<sockaddr*>(&group)));
  EXPECT_EQ(EADDRNOTAVAIL, errno) << "never joined";
}

TEST_F(CmOptions, AckTimeoutBecomesTheQpTimeout) {
  ConnectOptions options;
  options.clientAckTimeout = 19;
  ASSERT_NO_FATAL_FAILURE(connect(options));
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  ASSERT_EQ(0, ibv_query_qp(client_.qp, &attr, IBV_QP_TIMEOUT, &init));
  EXPECT_EQ(19, attr.timeout);
  ASSERT_EQ(0, ibv_query_qp(server_.qp, &attr, IBV_QP_TIMEOUT, &init));
  EXPECT_EQ(14, attr.timeout) << "the default where the option was not set";
}

}  // namespace
}  // namespace rdmamsg::test
