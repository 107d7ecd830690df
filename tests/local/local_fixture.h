// Test support: a LocalServer + LoopbackHandler on a loop the test steps
// until a condition holds (no sleeps, bounded in count and time).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "raw_client.h"
#include "test_server.h"

namespace rdmamsg::test {

// A decoded frame with owned fields (Frame views die with the buffer).
struct Got {
  proto::FrameKind kind{};
  uint64_t msgId = 0;
  Errc errc = Errc::ok;
  uint8_t inReplyTo = 0;
  std::string node, service, otherService, text, payload;
  std::vector<uint64_t> acks;
  size_t ackRanges = 0;  // ranges in an ACK frame
};

class LocalFixture : public ::testing::Test {
 protected:
  static constexpr uint32_t kMaxMessage = 4096;

  LocalFixture() : handler_("nodeA") { restart(testConfig(dir_.file("s.sock"), kMaxMessage)); }

  void restart(local::LocalServerConfig cfg) {
    server_.reset();
    server_ = std::make_unique<local::LocalServer>(loop_, std::move(cfg), handler_);
    handler_.attach(*server_);
  }

  template <typename Cond>
  bool stepUntil(Cond cond, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (int i = 0; i < 1000000; ++i) {
      if (cond()) return true;
      if (std::chrono::steady_clock::now() >= deadline) break;
      loop_.runOnce(std::chrono::milliseconds(5));
    }
    return cond();
  }

  // Steps until `c` has a frame; fails the test if none comes.
  Got next(RawClient& c) {
    proto::Frame f;
    Got g;
    if (!stepUntil([&] { return c.next(f); })) {
      ADD_FAILURE() << "no frame arrived";
      return g;
    }
    g.kind = f.kind;
    g.msgId = f.msgId;
    g.errc = f.errc;
    g.inReplyTo = f.inReplyTo;
    g.node = f.node;
    g.service = f.service;
    g.otherService = f.otherService;
    g.text = f.text;
    g.payload.assign(reinterpret_cast<const char*>(f.payload.data()), f.payload.size());
    g.ackRanges = f.ackRangeCount();
    for (size_t i = 0; i < f.ackRangeCount(); ++i) {
      const proto::AckRange a = f.ackRange(i);
      for (uint64_t id = a.first; id < a.first + a.count; ++id)
        g.acks.push_back(id);
    }
    return g;
  }

  // A connected client that completed HELLO/WELCOME.
  std::unique_ptr<RawClient> connect() {
    auto c = std::make_unique<RawClient>(server_->socketPath());
    EXPECT_TRUE(c->connected());
    proto::encodeHello(c->out(), "test");
    c->write();
    Got w = next(*c);
    EXPECT_EQ(w.kind, proto::FrameKind::welcome);
    return c;
  }

  Got registerService(RawClient& c, std::string_view service) {
    proto::encodeRegister(c.out(), service);
    c.write();
    return next(c);
  }

  void send(RawClient& c, uint64_t id, std::string_view node, std::string_view service,
            std::string_view payload, std::string_view from = "") {
    proto::encodeSend(c.out(), id, node, service, from,
                      std::as_bytes(std::span(payload.data(), payload.size())));
    c.write();
  }

  TempDir dir_;
  loop::EventLoop loop_;
  LoopbackHandler handler_;
  std::unique_ptr<local::LocalServer> server_;
};

}  // namespace rdmamsg::test
