// LoopbackHandler: loops messages for the own node back to local listeners.
#include "loopback_handler.h"

#include <nlohmann/json.hpp>

namespace rdmamsg::test {

Status LoopbackHandler::onRegister(local::SessionId session, std::string_view service) {
  auto [it, inserted] = services_.try_emplace(std::string(service), session);
  if (!inserted) {
    return Status(Errc::duplicate_service, "service '" + std::string(service) +
                                               "' is already registered on node '" + node_ + "'");
  }
  return {};
}

void LoopbackHandler::onUnregister(local::SessionId session, std::string_view service) {
  auto it = services_.find(service);
  if (it != services_.end() && it->second == session) services_.erase(it);
}

void LoopbackHandler::onSend(local::SessionId session, const local::SendRequest& req) {
  ++sends;
  lastSender = session;
  if (pauseOnSend) server_->pauseReading(session);
  if (req.node != node_) {
    server_->fail(session, req.msgId,
                  Status(Errc::unknown_node, "unknown node '" + std::string(req.node) + "'"));
    return;
  }
  auto it = services_.find(req.service);
  if (it == services_.end()) {
    server_->fail(
        session, req.msgId,
        Status(Errc::unknown_service, "no listener for service '" + std::string(req.service) +
                                          "' on node '" + node_ + "'"));
    return;
  }
  const local::Receipt receipt{local::Receipt::Kind::local, session, 0, req.msgId, 1};
  server_->deliver(it->second, node_, req.fromService, req.service, req.payload, receipt);
}

void LoopbackHandler::attach(local::LocalServer& server) {
  server_ = &server;
  server.setConsumedCallback([this](local::SessionId, const local::Receipt& r, size_t, Errc errc) {
    for (uint64_t i = 0; i < r.count; i++)
      if (errc == Errc::ok)
        server_->ack(r.owner, r.seq + i);
      else
        server_->fail(r.owner, r.seq + i, Status(errc, "the listener went away"));
  });
}

std::string LoopbackHandler::onStatus(local::SessionId) {
  nlohmann::json j;
  j["node"] = node_;
  j["peers"] = nlohmann::json::array(
      {{{"name", "nodeB"}, {"state", "established"}, {"address", "127.0.0.2:7471"}},
       {{"name", "nodeC"}, {"state", "connecting"}}});
  j["services"] = nlohmann::json::array();
  for (const auto& [name, owner] : services_)
    j["services"].push_back(name);
  return j.dump();
}

void LoopbackHandler::onSessionClosed(local::SessionId session) {
  closed.push_back(session);
  std::erase_if(services_, [session](const auto& kv) { return kv.second == session; });
}

}  // namespace rdmamsg::test
