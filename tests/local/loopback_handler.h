// Test support: a trivial in-process LocalHandler standing in for the
// router. A message to this node is delivered to the session that registered
// the destination service and acknowledged once the listener's application
// has taken it (CONSUMED); anything else fails with the
// error a router would give (unknown_node / unknown_service).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "daemon/local/local_handler.h"
#include "daemon/local/local_server.h"

namespace rdmamsg::test {

class LoopbackHandler : public local::LocalHandler {
 public:
  explicit LoopbackHandler(std::string node) : node_(std::move(node)) {}
  void attach(local::LocalServer& server);

  Status onRegister(local::SessionId session, std::string_view service) override;
  void onUnregister(local::SessionId session, std::string_view service) override;
  void onSend(local::SessionId session, const local::SendRequest& req) override;
  std::string onStatus(local::SessionId session) override;
  void onSessionClosed(local::SessionId session) override;

  // Observations for tests.
  size_t sends = 0;
  std::vector<local::SessionId> closed;
  local::SessionId lastSender = 0;
  // Pause the sender's reading on every send (backpressure tests).
  bool pauseOnSend = false;

 private:
  std::string node_;
  local::LocalServer* server_ = nullptr;
  std::map<std::string, local::SessionId, std::less<>> services_;
};

}  // namespace rdmamsg::test
