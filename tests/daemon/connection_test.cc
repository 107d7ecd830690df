// Unit tests of one connection to a peer (daemon/peer/connection.h), both
// ends in this process on softrdma's device, driven by a real event loop,
// rdma_cm event pump and service queue, as the mesh drives them (the
// listener here is the test's): the dialer resolves, asks for its device in
// the service step and connects; the acceptor takes the request's id; both
// end established with each other's Hello, carry batches both ways, and
// close together, each with its reason. A dial that nobody answers, one
// the acceptor never accepts, an acceptor without a device and mesh
// secrets that differ all end the connection with the reason, and matching
// secrets authenticate it and protect every batch.
#include "daemon/peer/connection.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "daemon/loop/event_loop.h"
#include "daemon/loop/service_queue.h"
#include "daemon/peer/protocol.h"
#include "daemon/rdma/cm_events.h"
#include "daemon/rdma/device.h"
#include "tests/daemon/rdma_fixture.h"

namespace rdmamsg::peer {
namespace {

using namespace std::chrono_literals;
using rdma::test::asSockaddr;
using rdma::test::ipv4;
using rdma::test::kBuffer;
using rdma::test::stepUntil;

constexpr uint32_t kDialerKey = 1, kAcceptorKey = 2;

ConnParams params(const char* self, const char* peer) {
  ConnParams p;
  p.bufferSize = kBuffer;
  p.maxCredits = 8;
  p.sendBuffers = 4;
  p.connectTimeout = 5s;
  p.hello.nodeId = nodeId(self);
  p.hello.targetId = nodeId(peer);
  p.hello.incarnation = nodeId(self) ^ 0x5eed;
  p.hello.bufferSize = kBuffer;
  p.hello.maxMessage = 1 << 20;
  p.hello.flowWindow = 1 << 20;
  p.selfName = self;
  return p;
}

config::Secret secret(char fill) {
  config::Secret s;
  s.bytes = std::string(32, fill);
  s.fingerprint = config::fingerprintOf(s.bytes);
  return s;
}

void useSecret(ConnParams& p, const config::Secret& s) {
  p.hello.flags |= kHelloAuthenticates | kHelloBatchMac;
  p.secrets = {s};
}

// The Hello a connect request carries (the mesh checks it in Admission).
Hello helloOf(const rdma::CmEvent& e) {
  Hello h{};
  if (e.privateData.size() >= sizeof h) std::memcpy(&h, e.privateData.data(), sizeof h);
  return h;
}

// The message records of a received batch: (seq, src, dst, payload).
struct Message {
  uint64_t seq;
  std::string src, dst, payload;
};
std::vector<Message> messagesIn(std::span<const std::byte> batch) {
  std::vector<Message> out;
  BatchReader reader(batch);
  if (!reader.open()) return out;
  Record r;
  while (reader.next(r))
    if (r.type == RecordType::kMessage)
      out.push_back(
          {r.seq, std::string(r.srcService), std::string(r.dstService),
           std::string(reinterpret_cast<const char*>(r.payload.data()), r.payload.size())});
  return out;
}

class ConnectionTest : public ::testing::Test {
 protected:
  ConnectionTest() { budget_.limit = 1 << 30; }

  // Listens on 127.0.0.1 (the acceptor is made from the first request) and
  // dials it. `accept`: whether requests are accepted (else they are kept,
  // unanswered).
  // `listenerPump`: the event channel of the listener and of the acceptor
  // made from its request (the test's own loop unless given).
  void dial(ConnParams dialer, ConnParams acceptor, bool accept = true,
            rdma::CmEventPump* listenerPump = nullptr) {
    acceptorParams_ = std::move(acceptor);
    accept_ = accept;
    listener_.then = [this](const rdma::CmEvent& e) { onRequest(e); };
    Result<rdma::CmIdPtr> id =
        rdma::createCmId(listenerPump != nullptr ? listenerPump->channel() : pump_.channel(),
                         static_cast<rdma::CmHandler*>(&listener_));
    ASSERT_TRUE(id.ok()) << id.status().toString();
    listenId_ = std::move(id).value();
    port_ = peer::test::freePort();
    sockaddr_in a = ipv4("127.0.0.1", port_);
    ASSERT_NE(port_, 0);
    ASSERT_EQ(rdma_bind_addr(listenId_.get(), asSockaddr(a)), 0);
    ASSERT_EQ(rdma_listen(listenId_.get(), 4), 0);
    dialTo(std::move(dialer), port_);
  }
  void dialTo(ConnParams p, uint16_t port) {
    dialer_ = std::make_unique<Connection>(loop_, p, "beta", queue_.waker(kDialerKey));
    sockaddr_in src = ipv4("127.0.0.1", 0), dst = ipv4("127.0.0.1", port);
    dialer_->startActive(pump_.channel(), asSockaddr(src), asSockaddr(dst));
  }

  bool bothEstablished() {
    return stepUntil(loop_,
                     [this] {
                       return (dialer_->established() && acceptor_ && acceptor_->established()) ||
                              dialer_->down() || (acceptor_ && acceptor_->down());
                     }) &&
           dialer_->established() && acceptor_ && acceptor_->established();
  }

  // Writes a whole message into `c`'s batch and posts it.
  static bool send(Connection& c, uint64_t seq, const std::string& payload) {
    if (!c.openBatch(true)) return false;
    const auto bytes = std::as_bytes(std::span(payload.data(), payload.size()));
    c.batch().addMessage(seq, kFirstFragment | kLastFragment, "src", "dst", payload.size(), bytes);
    c.post();
    return true;
  }
  // Reads the batches of `c` that carry no message (credit returns), as a
  // peer reads everything that arrives: their buffers are reposted and the
  // credits they gave back are the other end's again.
  static void readCreditReturns(Connection& c) {
    bool read = false;
    while (c.hasBatch() && messagesIn(c.frontBatch()).empty()) {
      c.consumeBatch();
      read = true;
    }
    if (read) c.post();
  }
  // Steps the loop until `c` can write a message, reading credit returns
  // at both ends meanwhile, then writes it.
  bool sendWhenRoom(Connection& c, uint64_t seq, const std::string& payload) {
    return stepUntil(loop_,
                     [&] {
                       readCreditReturns(*dialer_);
                       readCreditReturns(*acceptor_);
                       return send(c, seq, payload) || c.down();
                     }) &&
           !c.down();
  }
  // The messages of the next batch that carries any, read and consumed.
  std::vector<Message> receive(Connection& c) {
    std::vector<Message> got;
    stepUntil(loop_, [&] {
      while (got.empty() && c.hasBatch()) {
        got = messagesIn(c.frontBatch());
        c.consumeBatch();
        c.post();
      }
      return !got.empty() || c.down();
    });
    return got;
  }

  rdma::Device* deviceOf(ibv_context* ctx) {
    if (!device_) {
      rdma::PoolParams pools;
      pools.bufferSize = kBuffer;
      pools.sendBuffers = 16;
      pools.sharedReceive = false;
      pools.perPeerCount = 8;
      auto d = rdma::Device::open(loop_, ctx, 256, pools, budget_, nullptr);
      if (!d) return nullptr;
      device_ = std::move(d).value();
    }
    return device_.get();
  }

  // The service step, as the mesh's: a connection whose route is resolved
  // is handed its device.
  void service(uint32_t key) {
    Connection* c = key == kDialerKey ? dialer_.get() : acceptor_.get();
    if (c == nullptr) return;
    if (ibv_context* ctx = c->wantsDevice()) c->useDevice(deviceOf(ctx));
  }

  void onRequest(const rdma::CmEvent& e) {
    if (e.type != RDMA_CM_EVENT_CONNECT_REQUEST) return;
    if (!accept_ || acceptor_) {
      unanswered_.emplace_back(e.id);  // destroyed with the test
      return;
    }
    acceptor_ =
        std::make_unique<Connection>(loop_, acceptorParams_, "alpha", queue_.waker(kAcceptorKey));
    acceptor_->accept(e.id, helloOf(e), withoutDevice_ ? nullptr : deviceOf(e.id->verbs));
  }

  loop::EventLoop loop_;
  rdma::CmEventPump pump_{loop_};
  loop::ServiceQueue queue_{loop_, [this](uint32_t key) { service(key); }};
  rdma::MemoryBudget budget_;
  // Declared before the connections and ids: they go first.
  std::unique_ptr<rdma::Device> device_;
  rdma::test::RecordingHandler listener_;
  rdma::CmIdPtr listenId_;
  std::vector<rdma::CmIdPtr> unanswered_;
  uint16_t port_ = 0;
  ConnParams acceptorParams_;
  bool accept_ = true;
  bool withoutDevice_ = false;  // the acceptor is given no device
  std::unique_ptr<Connection> dialer_, acceptor_;
};

TEST_F(ConnectionTest, TheDialerAndTheAcceptorAreEstablishedWithEachOthersHello) {
  dial(params("alpha", "beta"), params("beta", "alpha"));
  ASSERT_TRUE(bothEstablished()) << dialer_->closeReason();

  EXPECT_TRUE(dialer_->active());
  EXPECT_FALSE(acceptor_->active());
  ASSERT_TRUE(dialer_->remote().has_value());
  ASSERT_TRUE(acceptor_->remote().has_value());
  EXPECT_EQ(dialer_->remote()->nodeId, nodeId("beta"));
  EXPECT_EQ(acceptor_->remote()->nodeId, nodeId("alpha"));
  EXPECT_EQ(dialer_->remote()->incarnation, nodeId("beta") ^ 0x5eed);
  EXPECT_EQ(dialer_->remoteAddress(), "127.0.0.1:" + std::to_string(port_));
  EXPECT_EQ(dialer_->device(), device_.get());
  EXPECT_EQ(acceptor_->device(), device_.get());
  // Each may fill the other's receive buffers: the credits its Hello granted.
  EXPECT_GT(dialer_->credits(), 0u);
  EXPECT_GT(acceptor_->credits(), 0u);
  EXPECT_FALSE(dialer_->authenticates());
  EXPECT_EQ(dialer_->batchProtection(), nullptr);
}

TEST_F(ConnectionTest, BatchesCarryTheirMessagesBothWaysInOrder) {
  dial(params("alpha", "beta"), params("beta", "alpha"));
  ASSERT_TRUE(bothEstablished());

  ASSERT_TRUE(send(*dialer_, 1, "first"));
  std::vector<Message> got = receive(*acceptor_);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].seq, 1u);
  EXPECT_EQ(got[0].src, "src");
  EXPECT_EQ(got[0].dst, "dst");
  EXPECT_EQ(got[0].payload, "first");

  // More batches than the dialer holds send buffers: they come back and go
  // again, and arrive in order.
  std::vector<uint64_t> seqs;
  for (uint64_t seq = 2; seq <= 20; seq++) {
    ASSERT_TRUE(sendWhenRoom(*dialer_, seq, "m" + std::to_string(seq)))
        << "no send buffer or credit came back for " << seq;
    for (const Message& m : receive(*acceptor_))
      seqs.push_back(m.seq);
  }
  std::vector<uint64_t> want;
  for (uint64_t seq = 2; seq <= 20; seq++)
    want.push_back(seq);
  EXPECT_EQ(seqs, want);

  ASSERT_TRUE(sendWhenRoom(*acceptor_, 7, "answer"));
  got = receive(*dialer_);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].seq, 7u);
  EXPECT_EQ(got[0].payload, "answer");
  EXPECT_GE(dialer_->counters().sendsPosted, 20u);
}

TEST_F(ConnectionTest, ClosingOneEndClosesBothEachWithItsReason) {
  dial(params("alpha", "beta"), params("beta", "alpha"));
  ASSERT_TRUE(bothEstablished());

  dialer_->close("the test is done");
  EXPECT_TRUE(dialer_->down());
  ASSERT_TRUE(stepUntil(loop_, [&] { return dialer_->reapable() && acceptor_->reapable(); }));
  EXPECT_EQ(dialer_->closeReason(), "the test is done");
  EXPECT_EQ(acceptor_->closeReason(), "peer disconnected");
  // Closed means nothing more is sent.
  EXPECT_FALSE(dialer_->openBatch(true));
}

TEST_F(ConnectionTest, ADialThatNobodyAnswersEndsRejectedWithoutAPeerReason) {
  loop_.runOnce(1ms);
  dialTo(params("alpha", "beta"), peer::test::freePort());
  ASSERT_TRUE(stepUntil(loop_, [&] { return dialer_->reapable(); }));
  EXPECT_FALSE(dialer_->established());
  ASSERT_TRUE(dialer_->rejectReason().has_value());
  EXPECT_EQ(*dialer_->rejectReason(), RejectReason::kNone);
  EXPECT_NE(dialer_->closeReason().find("rejected"), std::string::npos) << dialer_->closeReason();
}

TEST_F(ConnectionTest, ARequestNeverAcceptedEndsTheDialAtItsConnectTimeout) {
  ConnParams p = params("alpha", "beta");
  p.connectTimeout = 300ms;
  dial(p, params("beta", "alpha"), /*accept=*/false);
  ASSERT_TRUE(stepUntil(loop_, [&] { return dialer_->down(); }));
  EXPECT_EQ(dialer_->closeReason(), "connection not established within 300 ms");
  EXPECT_FALSE(unanswered_.empty());  // the request did reach the listener
  EXPECT_TRUE(stepUntil(loop_, [&] { return dialer_->reapable(); }));
}

TEST_F(ConnectionTest, AnAcceptorWithoutADeviceFailsAndTheDialerIsNotLeftWaiting) {
  ConnParams p = params("alpha", "beta");
  p.connectTimeout = 3s;
  withoutDevice_ = true;
  dial(p, params("beta", "alpha"));
  ASSERT_TRUE(stepUntil(loop_, [&] { return acceptor_ != nullptr; }));
  EXPECT_TRUE(acceptor_->down());
  EXPECT_EQ(acceptor_->closeReason(), "no RDMA device resources");
  // The mesh destroys a closed connection on a later turn, and its request's
  // id with it, which refuses the request: the dialer does not wait for its
  // connect timeout.
  ASSERT_TRUE(stepUntil(loop_, [&] {
    if (acceptor_ && acceptor_->reapable()) acceptor_.reset();
    return dialer_->down();
  }));
  EXPECT_FALSE(dialer_->established());
  EXPECT_NE(dialer_->closeReason(), "connection not established within 3000 ms");
}

TEST_F(ConnectionTest, MatchingSecretsAuthenticateAndProtectEveryBatch) {
  ConnParams a = params("alpha", "beta"), b = params("beta", "alpha");
  useSecret(a, secret('k'));
  useSecret(b, secret('k'));
  dial(a, b);
  ASSERT_TRUE(bothEstablished()) << dialer_->closeReason() << " / "
                                 << (acceptor_ ? acceptor_->closeReason() : "");
  EXPECT_TRUE(dialer_->authenticated());
  EXPECT_TRUE(acceptor_->authenticated());
  EXPECT_EQ(dialer_->secretFingerprint(), secret('k').fingerprint);
  ASSERT_NE(dialer_->batchProtection(), nullptr);
  EXPECT_STREQ(dialer_->batchProtection(), "aes-256-gmac");

  ASSERT_TRUE(send(*dialer_, 1, "sealed"));
  std::vector<Message> got = receive(*acceptor_);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].payload, "sealed");
}

TEST_F(ConnectionTest, SecretsThatDifferFailAuthenticationOnBothEnds) {
  ConnParams a = params("alpha", "beta"), b = params("beta", "alpha");
  useSecret(a, secret('k'));
  useSecret(b, secret('x'));
  dial(a, b);
  ASSERT_TRUE(stepUntil(
      loop_, [&] { return dialer_->down() && acceptor_ != nullptr && acceptor_->down(); }));
  EXPECT_FALSE(dialer_->authenticated());
  EXPECT_FALSE(acceptor_->authenticated());
  EXPECT_FALSE(dialer_->authFailure().ok() && acceptor_->authFailure().ok());
  EXPECT_NE(dialer_->closeReason().find("authentication failed"), std::string::npos)
      << dialer_->closeReason();
  EXPECT_TRUE(stepUntil(loop_, [&] { return dialer_->reapable() && acceptor_->reapable(); }));
}

// On the passive side a batch can complete before ESTABLISHED is read from
// the event channel (the dialer sends once its own ESTABLISHED is in): the
// batch proves the connection up, so losing it then is a loss of an
// established connection, logged and counted as one (and a peer that
// breaks the protocol in its first batch is reported as such).
TEST_F(ConnectionTest, ABatchBeforeTheAcceptorReadsEstablishedProvesTheConnectionUp) {
  loop::EventLoop listenerLoop;  // stepped only until the request is accepted
  rdma::CmEventPump listenerPump{listenerLoop};
  dial(params("alpha", "beta"), params("beta", "alpha"), true, &listenerPump);
  ASSERT_TRUE(stepUntil(loop_, [&] {
    listenerLoop.runOnce(1ms);
    return acceptor_ != nullptr;
  }));
  ASSERT_TRUE(stepUntil(loop_, [&] { return dialer_->established() || dialer_->down(); }));
  ASSERT_TRUE(dialer_->established()) << dialer_->closeReason();
  ASSERT_TRUE(send(*dialer_, 1, "early"));
  ASSERT_TRUE(stepUntil(loop_, [&] { return acceptor_->hasBatch() || acceptor_->down(); }));
  ASSERT_TRUE(acceptor_->hasBatch()) << acceptor_->closeReason();
  EXPECT_FALSE(acceptor_->established()) << "its ESTABLISHED is still unread";
  EXPECT_TRUE(acceptor_->wasEstablished());

  acceptor_->close("the test is done");
  EXPECT_TRUE(acceptor_->wasEstablished());
  EXPECT_TRUE(stepUntil(loop_, [&] {
    listenerLoop.runOnce(1ms);
    return acceptor_->reapable() && dialer_->reapable();
  }));
  acceptor_.reset();  // its id and the listener's are on listenerPump's channel
  listenId_.reset();
}

TEST_F(ConnectionTest, TheTosOfADialedIdIsTheTrafficClassOfItsQueuePair) {
  ConnParams a = params("alpha", "beta");
  a.tos = 106;
  dial(a, params("beta", "alpha"));
  ASSERT_TRUE(bothEstablished());
  ASSERT_TRUE(dialer_->trafficClass().has_value());
  EXPECT_EQ(*dialer_->trafficClass(), 106);
}

}  // namespace
}  // namespace rdmamsg::peer
