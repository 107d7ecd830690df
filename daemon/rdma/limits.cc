// Device limits against the configuration (limits.h).
#include "daemon/rdma/limits.h"

#include <cerrno>
#include <system_error>

#include "config/units.h"
#include "daemon/rdma/buffer_pool.h"

namespace rdmamsg::rdma {

Needs needsOf(const config::Config& c, std::optional<size_t> peers) {
  const config::Buffers& b = c.buffers;
  Needs n;
  const bool shared = b.receiveQueue == config::ReceiveQueue::kShared;
  n.sendWr = b.sendBuffersPerPeer() + 1;
  n.recvWr = shared ? 0 : b.bufferCount;
  n.sge = 2;  // a batch head and a payload posted in place
  const uint64_t qps = 2 * uint64_t{peers.value_or(c.laneCount())} + 2;
  // The SRQ holds every allowance (initial grants and lent buffers), and a
  // chunk registered ahead.
  n.srqWr = shared ? qps * b.initialGrant() + b.sharedReceiveBuffers + b.bufferCount : 0;
  n.cqe = qps * (uint64_t{n.sendWr} + n.recvWr) + n.srqWr;
  n.messageBytes = b.bufferSize;
  return n;
}

MemoryPlan memoryPlan(const config::Config& c, std::optional<size_t> peers) {
  const config::Buffers& b = c.buffers;
  const auto bytes = [&](uint64_t count) {
    return BufferPool::registeredBytesFor(b.bufferSize, static_cast<uint32_t>(count));
  };
  MemoryPlan m;
  const bool shared = b.receiveQueue == config::ReceiveQueue::kShared;
  m.sendPool = bytes(b.sendBuffers);
  m.burst = shared ? bytes(b.sharedReceiveBuffers) : 0;
  m.perPeer = shared ? uint64_t{b.initialGrant()} * b.bufferSize : bytes(b.bufferCount);
  m.allPeers = m.sendPool + m.burst + m.perPeer * peers.value_or(c.laneCount());
  m.limit = b.registeredMemoryLimit;
  return m;
}

std::string describe(const MemoryPlan& m, const config::Config& c, size_t peers) {
  const config::Buffers& b = c.buffers;
  const bool shared = b.receiveQueue == config::ReceiveQueue::kShared;
  std::string out =
      "registered memory: " + config::formatSize(m.perPeer) + " per connected peer (" +
      (shared ? std::to_string(b.initialGrant()) + " shared receive buffers granted"
              : "buffer_count " + std::to_string(b.bufferCount) + " receive buffers") +
      " x buffer_size " + config::formatSize(b.bufferSize) + "), " +
      config::formatSize(m.sendPool) + " of send buffers (send_buffers " +
      std::to_string(b.sendBuffers) + ")";
  if (shared)
    out += ", up to " + config::formatSize(m.burst) +
           " lent to busy peers (shared_receive_buffers " + std::to_string(b.sharedReceiveBuffers) +
           ")";
  out += "; " + config::formatSize(m.allPeers) + " with all " + std::to_string(peers) +
         " peers connected, within registered_memory_limit " + config::formatSize(m.limit);
  if (m.allPeers > m.limit)
    out += " (which holds " + std::to_string(m.peersWithinLimit()) + " connected peers at once)";
  return out;
}

std::vector<std::string> checkLimits(const config::Config& c, const ibv_device_attr& a,
                                     const std::string& device, std::optional<size_t> peers) {
  std::vector<std::string> problems;
  const config::Buffers& b = c.buffers;
  Needs n = needsOf(c, peers);
  auto on = " on RDMA device " + device;
  if (a.max_qp_wr > 0 && n.sendWr > static_cast<uint32_t>(a.max_qp_wr))
    problems.push_back(
        "buffer_count: " + std::to_string(b.bufferCount) + " needs " + std::to_string(n.sendWr) +
        " send work requests per queue pair (one per send buffer and one for teardown), "
        "over the max_qp_wr of " +
        std::to_string(a.max_qp_wr) + on + "; use at most " + std::to_string(a.max_qp_wr - 1));
  if (n.srqWr > 0 && a.max_srq == 0)
    problems.push_back(
        "receive_queue: shared needs a shared receive queue, and the device has "
        "none (max_srq 0)" +
        on + "; use receive_queue: per_peer");
  if (n.srqWr > 0 && a.max_srq_wr > 0 && n.srqWr > static_cast<uint64_t>(a.max_srq_wr))
    problems.push_back("shared_receive_buffers: " + std::to_string(b.sharedReceiveBuffers) +
                       " with " + std::to_string(peers.value_or(c.laneCount())) +
                       " peers needs a shared receive queue of " + std::to_string(n.srqWr) +
                       " work requests, over the max_srq_wr of " + std::to_string(a.max_srq_wr) +
                       on);
  if (a.max_sge > 0 && n.sge > static_cast<uint32_t>(a.max_sge))
    problems.push_back("the device allows " + std::to_string(a.max_sge) +
                       " scatter/gather entries (max_sge)" + on + "; rdmamsgd needs 2");
  if (a.max_cqe > 0 && n.cqe > static_cast<uint64_t>(a.max_cqe))
    problems.push_back("buffer_count: " + std::to_string(b.bufferCount) + " with " +
                       std::to_string(peers.value_or(c.laneCount())) +
                       " peers needs a completion queue of " + std::to_string(n.cqe) +
                       " entries, over the max_cqe of " + std::to_string(a.max_cqe) + on);
  return problems;
}

namespace {

Status ioError(std::string what, int err) {
  return Status(Errc::io_error,
                what + ": " + std::error_code(err, std::generic_category()).message());
}

Result<DeviceInfo> firstDevice() {
  int n = 0;
  DeviceListPtr list(ibv_get_device_list(&n));
  if (!list || n == 0) return Status(Errc::io_error, "no RDMA device found");
  DeviceInfo info;
  info.name = ibv_get_device_name(list[0]);
  ContextPtr ctx(ibv_open_device(list[0]));
  if (!ctx) return ioError("cannot open RDMA device " + info.name, errno);
  if (int rc = ibv_query_device(ctx.get(), &info.attr); rc != 0)
    return ioError("ibv_query_device on " + info.name, rc);
  return info;
}

}  // namespace

// Without an rdma_cm id to bind (no event channel, no id) the listen
// address's device cannot be found: the first device stands for it, as for
// a wildcard address.
Result<DeviceInfo> probeDevice(const config::Address& listen) {
  EventChannelPtr channel(rdma_create_event_channel());
  if (!channel) return firstDevice();
  Result<CmIdPtr> created = createCmId(channel.get());
  if (!created) return firstDevice();
  CmIdPtr id = std::move(created).value();
  sockaddr_storage addr{};
  listen.toSockaddr(addr);
  reinterpret_cast<sockaddr_in*>(&addr)->sin_port = 0;  // same offset for IPv6: a running
                                                        // daemon may hold the port
  if (rdma_bind_addr(id.get(), reinterpret_cast<sockaddr*>(&addr)) != 0)
    return ioError("cannot bind rdma_cm to " + listen.toString(), errno);
  if (id->verbs == nullptr) return firstDevice();  // wildcard address
  DeviceInfo info;
  info.name = id->verbs->device != nullptr ? ibv_get_device_name(id->verbs->device) : "?";
  if (int rc = ibv_query_device(id->verbs, &info.attr); rc != 0)
    return ioError("ibv_query_device on " + info.name, rc);
  return info;
}

}  // namespace rdmamsg::rdma
