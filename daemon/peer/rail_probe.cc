// A rail's probe (rail_probe.h).
#include "daemon/peer/rail_probe.h"

#include <utility>

#include "common/sys_error.h"

namespace rdmamsg::peer {

RailProbe::RailProbe(loop::EventLoop& loop, std::size_t rail, const Hello& hello,
                     std::optional<uint8_t> tos, std::chrono::milliseconds timeout,
                     loop::ServiceQueue::Waker wake)
    : rail_(rail),
      hello_(hello),
      tos_(tos),
      timeout_(timeout),
      wake_(std::move(wake)),
      timer_(std::make_unique<loop::Timer>(loop, [this] {
        finish(Outcome::kFailed, "no answer within " + std::to_string(timeout_.count()) + " ms");
      })) {
  hello_.flags |= kHelloProbe;
}

RailProbe::~RailProbe() = default;

void RailProbe::start(rdma_event_channel* channel, const sockaddr* src, const sockaddr* dst) {
  timer_->arm(timeout_);
  rdma_cm_id* raw = nullptr;
  if (rdma_create_id(channel, &raw, static_cast<rdma::CmHandler*>(this), RDMA_PS_TCP) != 0)
    return finish(Outcome::kFailed, "rdma_create_id: " + errnoText(errno));
  id_.reset(raw);
  if (tos_) {
    if (Status st = rdma::setTos(id_.get(), *tos_); !st.ok())
      return finish(Outcome::kFailed, st.message());
  }
  const auto ms = static_cast<int>(timeout_.count());
  if (rdma_resolve_addr(id_.get(), const_cast<sockaddr*>(src), const_cast<sockaddr*>(dst), ms) != 0)
    finish(Outcome::kFailed, "rdma_resolve_addr: " + errnoText(errno));
}

void RailProbe::connect() {
  if (id_->verbs != nullptr) device_ = ibv_get_device_name(id_->verbs->device);
  rdma_conn_param p{};
  p.private_data = &hello_;
  p.private_data_len = sizeof(Hello);
  p.qp_num = 1;  // no queue pair: the request is answered with a REJ
  p.retry_count = 7;
  p.rnr_retry_count = 7;
  if (rdma_connect(id_.get(), &p) != 0)
    finish(Outcome::kFailed, "rdma_connect: " + errnoText(errno));
}

void RailProbe::onCmEvent(const rdma::CmEvent& e) {
  if (outcome_ != Outcome::kPending) return;
  switch (e.type) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      if (rdma_resolve_route(id_.get(), static_cast<int>(timeout_.count())) != 0)
        finish(Outcome::kFailed, "rdma_resolve_route: " + errnoText(errno));
      return;
    case RDMA_CM_EVENT_ROUTE_RESOLVED:
      return connect();
    case RDMA_CM_EVENT_REJECTED: {
      const Result<Hello> h = decodeHello(e.privateData.data(), e.privateData.size());
      return finish(Outcome::kReached, h ? std::string("answered: ") + toString(h->reason)
                                         : "refused (nobody listening)");
    }
    case RDMA_CM_EVENT_CONNECT_RESPONSE:
    case RDMA_CM_EVENT_ESTABLISHED:
      // A daemon that does not know probes accepted it: reached all the same.
      rdma_disconnect(id_.get());
      return finish(Outcome::kReached, "accepted");
    default:
      return finish(Outcome::kFailed, std::string(rdma_event_str(e.type)) + " (" +
                                          errnoText(e.status < 0 ? -e.status : e.status) + ")");
  }
}

void RailProbe::finish(Outcome o, std::string detail) {
  if (outcome_ != Outcome::kPending) return;
  outcome_ = o;
  detail_ = std::move(detail);
  timer_->cancel();
  wake_();
}

}  // namespace rdmamsg::peer
