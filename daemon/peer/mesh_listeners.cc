// The mesh's listeners, one per rail (mesh.h): listening on every rail of
// `listen`, the device limits checked at the first, listening again after a
// device went away or an address moved, and the events of a listener.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/sys_error.h"
#include "daemon/peer/mesh.h"
#include "daemon/rdma/limits.h"

namespace rdmamsg::peer {

namespace {
constexpr int kListenBacklog = 128;
}  // namespace

bool Mesh::listening() const {
  return std::any_of(listeners_.begin(), listeners_.end(), [](const auto& id) { return !!id; });
}

Status Mesh::listen(std::size_t rail) {
  const config::Address& address = config_.listenRail(rail);
  rdma_cm_id* raw = nullptr;
  if (rdma_create_id(pump_->channel(), &raw, static_cast<rdma::CmHandler*>(this), RDMA_PS_TCP) != 0)
    return Status(Errc::io_error, "rdma_create_id: " + errnoText());
  rdma::CmIdPtr id(raw);
  sockaddr_storage addr{};
  address.toSockaddr(addr);
  if (config_.tos) {
    if (Status st = rdma::setTos(id.get(), *config_.tos); !st.ok())
      return Status(st.code(), "on the listener: " + st.message());
  }
  if (rdma_bind_addr(id.get(), reinterpret_cast<sockaddr*>(&addr)) != 0)
    return Status(Errc::io_error,
                  "cannot bind rdma_cm to " + address.toString() + ": " + errnoText());
  if (rdma_listen(id.get(), kListenBacklog) != 0)
    return Status(Errc::io_error, "cannot listen on " + address.toString() + ": " + errnoText());
  listeners_[rail] = std::move(id);
  if (ibv_context* verbs = listeners_[rail]->verbs; verbs != nullptr) {
    rdma::Device* d = deviceFor(verbs);
    if (d == nullptr)
      return Status(Errc::io_error,
                    "cannot open the RDMA device of the listener on " + address.toString());
    return checkLimits(d->attr(), d->name());
  }
  openAllDevices();
  if (checkedLimits_) return Status();
  // A wildcard address binds no device: check against the first one.
  if (auto info = rdma::probeDevice(address); info.ok()) return checkLimits(info->attr, info->name);
  return Status();
}

// A wildcard listener binds no device: every device rdma_cm knows is opened
// now, so that its pools are registered at start rather than by the first
// connection through it (rdma_cm ids share these contexts).
void Mesh::openAllDevices() {
  int n = 0;
  ibv_context** list = rdma_get_devices(&n);
  if (list == nullptr) return;
  for (int i = 0; i < n; i++)
    if (list[i] != nullptr) deviceFor(list[i]);
  rdma_free_devices(list);
}

// After a device was removed, or the address's device changed: listen
// again as soon as a device answers.
void Mesh::relisten() {
  if (stopping()) return;
  bool again = false, unfit = false, waiting = false;
  for (std::size_t rail = 0; rail < listeners_.size(); rail++) {
    if (listeners_[rail]) continue;
    Status st = listen(rail);
    if (st.ok()) {
      spdlog::info("listening for peers on {} again", config_.listenRail(rail).toString());
      again = true;
      continue;
    }
    listeners_[rail].reset();
    waiting = true;
    if (st.code() == Errc::bad_request) {
      spdlog::error("the RDMA device that came back cannot hold the configuration: {}",
                    st.message());
      unfit = true;
    } else {
      spdlog::debug("not listening on {} yet: {}", config_.listenRail(rail).toString(),
                    st.message());
    }
  }
  if (again) forEachPeer([](Peer& p) { p.redialSoon(); });
  if (waiting) relistenTimer_->arm(unfit ? kRelistenEvery * 10 : kRelistenEvery);
}

std::size_t Mesh::railOf(const rdma_cm_id* id) const {
  for (std::size_t rail = 0; rail < listeners_.size(); rail++)
    if (listeners_[rail].get() == id) return rail;
  return listeners_.size();
}

Status Mesh::checkLimits(const ibv_device_attr& attr, const std::string& device) {
  if (checkedLimits_) return Status();
  auto problems = rdma::checkLimits(config_, attr, device);
  if (!problems.empty()) return Status(Errc::bad_request, problems.front());
  checkedLimits_ = true;
  return Status();
}

void Mesh::onCmEvent(const rdma::CmEvent& e) {
  if (e.type == RDMA_CM_EVENT_CONNECT_REQUEST) return onConnectRequest(e);
  const std::size_t rail = railOf(e.id);
  if (rail == listeners_.size()) {  // a listener already replaced
    spdlog::debug("rdma_cm: {} on a former listener", rdma_event_str(e.type));
    return;
  }
  const std::string where = config_.listenRail(rail).toString();
  switch (e.type) {
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
      spdlog::error("RDMA device of the listener on {} removed", where);
      // The id must be destroyed (rdma_get_cm_event(3)): serviceDevices()
      // does it after the device's resources, which need its context.
      if (rdma::Device* d = devices_.find(listeners_[rail]->verbs)) {
        d->markFailed();
        queue_.mark(kDevicesKey);
        return;
      }
      listeners_[rail].reset();
      relistenTimer_->arm(kRelistenEvery);
      return;
    case RDMA_CM_EVENT_ADDR_CHANGE:
      // The device under the address changed (a bond's failover, a new
      // hardware address): a new id binds to what holds the address now.
      // The connections got the event too and are dialed again.
      spdlog::warn(
          "rdma_cm listener on {}: the address's device changed (ADDR_CHANGE): "
          "listening again",
          where);
      listeners_[rail].reset();
      relisten();
      return;
    default:
      spdlog::warn("rdma_cm listener on {}: unexpected event {}", where, rdma_event_str(e.type));
      return;
  }
}

}  // namespace rdmamsg::peer
