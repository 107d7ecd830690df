// What the status shows of a peer (peer.h, PeerSnapshot): its counters,
// flows and current connection, and the rail that connection runs over.
#include "daemon/peer/peer.h"

namespace rdmamsg::peer {

uint64_t Peer::remoteIncarnation() const {
  return conn_ != nullptr && conn_->remote() ? conn_->remote()->incarnation : 0;
}

PeerSnapshot Peer::snapshot() const {
  PeerSnapshot s;
  s.name = cfg_.name;
  s.address = config::toString(cfg_.rails());
  s.lastError = lastError_;
  s.lane = lane_;
  s.state = state_.get();
  s.queuedBytes = out_.queuedBytes();
  s.inFlight = out_.inFlight();
  s.counters = counters_;
  s.confirmed = out_.confirmed();
  s.failed = out_.failed();
  s.deliveryLatency = out_.deliveryLatency();
  s.flows = out_.flowStats();
  s.rails = railSnapshots();
  for (std::size_t i = 1; i < lanes_.size(); i++)
    s.lanes.push_back(lanes_[i]->snapshot());
  if (conn_ != nullptr)
    s.link = LinkSnapshot{remoteIncarnation(),
                          conn_->established(),
                          conn_->authenticated(),
                          conn_->secretFingerprint(),
                          conn_->credits(),
                          conn_->allowance(),
                          conn_->lent(),
                          conn_->counters(),
                          conn_->batchProtection(),
                          conn_->keyRotations(),
                          conn_->device() != nullptr ? conn_->device()->name() : std::string(),
                          conn_->trafficClass(),
                          conn_->remoteAddress(),
                          railOf(*conn_)};
  return s;
}

std::optional<std::size_t> Peer::railOf(const std::string& remoteAddress) const {
  const config::Parsed<config::Address> remote = config::parseAddress(remoteAddress);
  if (!remote) return std::nullopt;
  for (std::size_t i = 0; i < cfg_.railCount(); i++)
    if (cfg_.rail(i).host == remote.value->host) return i;
  return std::nullopt;
}

}  // namespace rdmamsg::peer
