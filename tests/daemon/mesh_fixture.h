// Test support for the peer layer: daemons' meshes in one process, on one
// real event loop, over softrdma (the test programs link libsoftrdma), each
// with a recording PeerEvents in place of the router. Tests step the loop
// until a condition holds, with a deadline.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "config/config.h"
#include "daemon/loop/event_loop.h"
#include "daemon/peer/events.h"
#include "daemon/peer/mesh.h"

namespace rdmamsg::peer::test {

using namespace std::chrono_literals;

// What the router would have seen.
class RecordingEvents : public PeerEvents {
 public:
  struct Incoming {
    Peer* from;
    uint64_t epoch, seq;
    std::string src, dst, payload;
  };
  std::map<std::string, Delivery> verdict;  // by destination service; default kDelivered
  std::vector<Incoming> incoming;
  std::map<uint64_t, uint64_t> deliveredCount;  // by session
  std::vector<std::pair<uint64_t, Status>> failures;
  std::vector<FlowKey> drained;
  int lost = 0, ups = 0;             // connections lost and up (subjects)
  std::vector<uint64_t> pubResults;  // tokens of the results received

  size_t incomingFor(const std::string& service) const {
    size_t n = 0;
    for (const auto& m : incoming)
      n += m.dst == service ? 1 : 0;
    return n;
  }

  Delivery deliverIncoming(Peer& from, uint64_t epoch, uint64_t seq, std::string_view src,
                           std::string_view dst, std::span<const std::byte> payload,
                           DeliveryRoom*) override {
    auto it = verdict.find(std::string(dst));
    Delivery d = it == verdict.end() ? Delivery::kDelivered : it->second;
    if (d == Delivery::kDelivered || d == Delivery::kAccepted)
      incoming.push_back(
          {&from, epoch, seq, std::string(src), std::string(dst),
           std::string(reinterpret_cast<const char*>(payload.data()), payload.size())});
    return d;
  }
  void connectionLost(Peer&) override { lost++; }
  void connectionUp(Peer&) override { ups++; }
  void pubResult(Peer&, uint64_t token, const PubResultBody&) override {
    pubResults.push_back(token);
  }
  void outcome(uint64_t, uint64_t msgId, const Status& status) override {
    failures.emplace_back(msgId, status);
  }
  void delivered(uint64_t session, uint64_t, uint64_t count) override {
    deliveredCount[session] += count;
  }
  void queueDrained(const FlowKey& key) override { drained.push_back(key); }
};

// A TCP port free on 127.0.0.1 and 127.0.0.2 (softrdma maps rdma_cm ports to TCP).
inline uint16_t freePort() {
  for (int attempt = 0; attempt < 50; attempt++) {
    uint16_t port = static_cast<uint16_t>(20000 + (getpid() * 7 + attempt * 131) % 12000);
    bool ok = true;
    for (const char* ip : {"127.0.0.1", "127.0.0.2", "127.0.0.3"}) {
      int fd = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(port);
      inet_pton(AF_INET, ip, &a.sin_addr);
      ok = ok && bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
      close(fd);
    }
    if (ok) return port;
  }
  return 0;
}

inline config::Address addressOf(const std::string& ip, uint16_t port) {
  return *config::parseAddress(ip + ":" + std::to_string(port)).value;
}

// A configuration for node `self` among `nodes` (name → ip), fast timers.
inline config::Config meshConfig(const std::string& self,
                                 const std::vector<std::pair<std::string, std::string>>& nodes,
                                 uint16_t port) {
  config::Config c;
  c.node = self;
  for (const auto& [name, ip] : nodes) {
    if (name == self)
      c.listen = addressOf(ip, port);
    else
      c.peers.push_back({name, addressOf(ip, port)});
  }
  c.buffers.bufferSize = 16 * 1024;
  c.buffers.bufferCount = 8;
  c.timers.heartbeatInterval = 100ms;
  c.timers.heartbeatTimeout = 400ms;
  c.timers.reconnectBackoffMin = 20ms;
  c.timers.reconnectBackoffMax = 200ms;
  c.timers.connectTimeout = 2s;
  c.timers.messageTimeout = 10s;
  return c;
}

// One daemon's mesh and what its router would have seen.
struct Node {
  config::Config config;
  RecordingEvents events;
  std::unique_ptr<Mesh> mesh;
  Node(loop::EventLoop& loop, config::Config c) : config(std::move(c)) {
    mesh = std::make_unique<Mesh>(loop, config, events, 0x1000 + config.node.size());
  }
  Peer& peer(const std::string& name) { return *mesh->peer(name); }
};

// Steps the loop until `cond` holds; false at the deadline.
template <typename Cond>
bool stepUntil(loop::EventLoop& loop, Cond&& cond, std::chrono::milliseconds timeout = 10s) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!cond()) {
    if (std::chrono::steady_clock::now() >= deadline) return cond();
    loop.runOnce(5ms);
  }
  return true;
}

inline std::span<const std::byte> bytesOf(const std::string& s) {
  return std::as_bytes(std::span(s));
}

// Two daemons' meshes, alpha on 127.0.0.1 and beta on 127.0.0.2, started by
// start() (which waits for their one connection) and shut down at the end.
class MeshPair : public ::testing::Test {
 protected:
  loop::EventLoop loop;
  uint16_t port = freePort();
  std::vector<std::pair<std::string, std::string>> nodes{{"alpha", "127.0.0.1"},
                                                         {"beta", "127.0.0.2"}};
  std::unique_ptr<Node> alpha, beta;

  void start(const std::function<void(config::Config&)>& tune = {}) {
    ASSERT_NE(port, 0);
    auto a = meshConfig("alpha", nodes, port), b = meshConfig("beta", nodes, port);
    if (tune) {
      tune(a);
      tune(b);
    }
    alpha = std::make_unique<Node>(loop, a);
    beta = std::make_unique<Node>(loop, b);
    alpha->mesh->start();
    beta->mesh->start();
    ASSERT_TRUE(stepUntil(loop, [&] {
      return alpha->peer("beta").established() && beta->peer("alpha").established() &&
             alpha->mesh->connectionCount() == a.laneCount() &&
             beta->mesh->connectionCount() == b.laneCount();
    })) << "mesh did not form with one connection per pair (and lane)";
  }

  void TearDown() override {
    bool done = alpha == nullptr;
    if (alpha) alpha->mesh->shutdown([&] { done = true; });
    bool doneB = beta == nullptr;
    if (beta) beta->mesh->shutdown([&] { doneB = true; });
    stepUntil(
        loop, [&] { return done && doneB; }, 5s);
  }

  // Closes alpha's connection to beta as a lost link would (not on purpose:
  // nothing tells the peer to dial again).
  void cutAlphasConnection(const std::string& why) {
    const Connection* c = alpha->peer("beta").connection();
    ASSERT_NE(c, nullptr);
    const_cast<Connection*>(c)->close(why);
  }

  // Sends `n` messages of `size` bytes on session 1 from alpha to beta/`service`.
  std::vector<FlowKey> send(const std::string& service, int n, size_t size, uint64_t& nextId) {
    std::vector<FlowKey> keys;
    std::string payload(size, 'p');
    for (int i = 0; i < n; i++) {
      Result<Admitted> admitted =
          alpha->peer("beta").send(1, nextId++, "src", service, bytesOf(payload));
      EXPECT_TRUE(admitted.ok()) << admitted.status().toString();
      if (admitted && admitted->holdOn) keys.push_back(*admitted->holdOn);
    }
    return keys;
  }
};

}  // namespace rdmamsg::peer::test
