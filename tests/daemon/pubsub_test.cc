// Subjects across a mesh of three in-process daemons (router, local server
// and mesh each, on one loop over softrdma), driven by clients that speak
// raw frames: publish/subscribe with one copy per host and confirmations
// that count what subscribers took, slow consumers that cost nobody else,
// queue groups, request/reply with its outcomes, and interest that is
// whole again on every connection and bounded per peer.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/local_protocol.h"
#include "daemon/local/local_server.h"
#include "daemon/router.h"
#include "mesh_fixture.h"
#include "raw_client.h"

namespace rdmamsg::peer::test {
namespace {

struct Daemon {
  config::Config config;
  Router router;
  std::unique_ptr<Mesh> mesh;
  std::unique_ptr<local::LocalServer> server;
  Daemon(loop::EventLoop& loop, config::Config c, const std::string& socket)
      : config(std::move(c)), router(config, loop) {
    config.local.socket = socket;
    mesh = std::make_unique<Mesh>(loop, config, router, 0x3000 + config.node.size());
    local::LocalServerConfig l;
    l.listener.path = socket;
    l.nodeName = config.node;
    l.maxMessageSize = 1u << 20;
    server = std::make_unique<local::LocalServer>(loop, l, router);
    router.attach(server.get(), mesh.get());
    server->setDrainedCallback([this](local::SessionId s) { router.onSessionDrained(s); });
    mesh->start();
  }
  Peer& peer(const std::string& name) { return *mesh->peer(name); }
  const pubsub::PubSub& pubsub() const { return router.pubsub(); }
};

// A frame a raw client read, copied.
struct Got {
  proto::FrameKind kind = proto::FrameKind::bye;
  uint64_t id = 0;
  Errc errc = Errc::ok;
  uint32_t matched = 0, taken = 0, dropped = 0;
  std::string node, subject, replyTo, payload, text;
};

// A client speaking raw frames; every frame it reads is kept in `got`.
class Raw {
 public:
  explicit Raw(const std::string& socket) : c_(socket) {
    proto::encodeHello(c_.out(), "raw");
    c_.write();
  }
  void subscribe(uint64_t subId, const std::string& pattern, const std::string& group = "",
                 proto::SlowConsumer policy = proto::SlowConsumer::drop, uint32_t limit = 0) {
    proto::encodeSub(c_.out(), subId, pattern, group, policy, limit);
    c_.write();
  }
  void unsubscribe(uint64_t subId) {
    proto::encodeUnsub(c_.out(), subId);
    c_.write();
  }
  void publish(uint64_t id, const std::string& subject, const std::string& payload,
               uint32_t timeoutMs = 0) {
    proto::encodePub(c_.out(), id, timeoutMs, subject, std::as_bytes(std::span(payload)));
    c_.write();
  }
  void respond(uint64_t id, const std::string& replyTo, const std::string& payload) {
    proto::encodeRespond(c_.out(), id, replyTo, std::as_bytes(std::span(payload)));
    c_.write();
  }
  // CONSUMED for everything delivered so far.
  void consumeAll() { c_.consumeAll(); }
  // Writes what the socket did not take yet, and reads what came.
  void pump() {
    c_.write();
    proto::Frame f;
    while (c_.next(f)) {
      Got g;
      g.kind = f.kind;
      g.id = f.msgId;
      g.errc = f.errc;
      g.matched = f.matched;
      g.taken = f.taken;
      g.dropped = f.dropped;
      g.node = f.node;
      g.subject = f.subject;
      g.replyTo = f.replyTo;
      g.payload.assign(reinterpret_cast<const char*>(f.payload.data()), f.payload.size());
      g.text = f.text;
      got.push_back(std::move(g));
    }
  }
  std::vector<const Got*> of(proto::FrameKind kind) {
    pump();
    std::vector<const Got*> out;
    for (const Got& g : got)
      if (g.kind == kind) out.push_back(&g);
    return out;
  }
  const Got* find(proto::FrameKind kind, uint64_t id) {
    for (const Got* g : of(kind))
      if (g->id == id) return g;
    return nullptr;
  }
  std::vector<Got> got;

 private:
  ::rdmamsg::test::RawClient c_;
};

using proto::FrameKind;

class PubSubMesh : public ::testing::Test {
 protected:
  loop::EventLoop loop;
  std::string dir;
  uint16_t port = 0;
  std::vector<std::pair<std::string, std::string>> nodes{
      {"alpha", "127.0.0.1"}, {"beta", "127.0.0.2"}, {"gamma", "127.0.0.3"}};
  std::unique_ptr<Daemon> alpha, beta, gamma;

  void SetUp() override {
    char tmpl[] = "/tmp/rdmamsg-pubsub-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir = tmpl;
    port = freePort();
    ASSERT_NE(port, 0);
  }
  void start(std::function<void(config::Config&)> tune = {}) {
    auto make = [&](const std::string& name) {
      config::Config c = meshConfig(name, nodes, port);
      c.buffers.flowWindow = 64 * 1024;
      c.buffers.sendQueueLimit = 32 * 1024;
      if (tune) tune(c);
      return std::make_unique<Daemon>(loop, c, dir + "/" + name + ".sock");
    };
    alpha = make("alpha");
    beta = make("beta");
    gamma = make("gamma");
    ASSERT_TRUE(stepUntil(loop, [&] {
      return alpha->peer("beta").established() && alpha->peer("gamma").established() &&
             beta->peer("gamma").established();
    }));
  }
  void TearDown() override {
    alpha.reset();
    beta.reset();
    gamma.reset();
    std::filesystem::remove_all(dir);
  }
  std::unique_ptr<Raw> client(Daemon& d) { return std::make_unique<Raw>(d.config.local.socket); }
  // Steps the loop until the client has a frame of `kind` with `id`.
  const Got* await(Raw& c, FrameKind kind, uint64_t id, std::chrono::milliseconds t = 5s) {
    const Got* g = nullptr;
    stepUntil(
        loop, [&] { return (g = c.find(kind, id)) != nullptr; }, t);
    return g;
  }
  // Steps until `d` knows `n` patterns of its peers' interest.
  bool interestReached(Daemon& d, size_t n) {
    return stepUntil(loop, [&] { return d.pubsub().remoteInterest().size() == n; });
  }
};

TEST_F(PubSubMesh, APublishReachesAMatchingSubscriberOnAnotherHostInOrderConfirmedOnceTaken) {
  start();
  auto sub = client(*beta);
  auto pub = client(*alpha);
  sub->subscribe(7, "orders.*.eu");
  ASSERT_NE(await(*sub, FrameKind::subscribed, 7), nullptr);
  ASSERT_TRUE(interestReached(*alpha, 1)) << "beta's interest never reached alpha";
  for (uint64_t id = 1; id <= 5; id++)
    pub->publish(id, "orders.x.eu", "order " + std::to_string(id));
  pub->publish(6, "orders.x.us", "not for beta");
  ASSERT_TRUE(stepUntil(loop, [&] { return sub->of(FrameKind::msg).size() == 5; }));
  const auto msgs = sub->of(FrameKind::msg);
  for (size_t i = 0; i < msgs.size(); i++) {
    EXPECT_EQ(msgs[i]->id, 7u) << "the client's subscription id";
    EXPECT_EQ(msgs[i]->subject, "orders.x.eu");
    EXPECT_EQ(msgs[i]->node, "alpha");
    EXPECT_EQ(msgs[i]->payload, "order " + std::to_string(i + 1)) << "out of order";
    EXPECT_TRUE(msgs[i]->replyTo.empty());
  }
  const Got* nobody = await(*pub, FrameKind::pub_ack, 6);
  ASSERT_NE(nobody, nullptr);
  EXPECT_EQ(nobody->errc, Errc::no_subscribers);
  stepUntil(
      loop, [] { return false; }, 100ms);
  EXPECT_EQ(pub->find(FrameKind::pub_ack, 1), nullptr) << "confirmed before the subscriber took it";
  sub->consumeAll();
  for (uint64_t id = 1; id <= 5; id++) {
    const Got* ack = await(*pub, FrameKind::pub_ack, id);
    ASSERT_NE(ack, nullptr) << id;
    EXPECT_EQ(ack->errc, Errc::ok) << ack->text;
    EXPECT_EQ(ack->matched, 1u);
    EXPECT_EQ(ack->taken, 1u);
    EXPECT_EQ(ack->dropped, 0u);
  }
  // Nothing of an answered publish stays behind: memory does not grow with
  // the publish rate until message_timeout.
  EXPECT_EQ(alpha->pubsub().pendingPublishes(), 0u);
  EXPECT_EQ(alpha->pubsub().pendingDeadlines(), 0u);
}

TEST_F(PubSubMesh, AHostGetsOneCopyWhateverItsSubscribersAndEachOfThemOneMessage) {
  start();
  auto b1 = client(*beta), b2 = client(*beta), g1 = client(*gamma), a1 = client(*alpha);
  b1->subscribe(1, "t.>");
  b2->subscribe(1, "t.*");
  g1->subscribe(1, "t.x");
  a1->subscribe(1, "*.x");
  ASSERT_TRUE(interestReached(*alpha, 3));
  auto pub = client(*alpha);
  const uint64_t sentBefore = alpha->peer("beta").counters().messagesSent;
  pub->publish(1, "t.x", "hello");
  for (Raw* c : {b1.get(), b2.get(), g1.get(), a1.get()}) {
    ASSERT_TRUE(stepUntil(loop, [&] { return c->of(FrameKind::msg).size() == 1; }));
    EXPECT_EQ(c->of(FrameKind::msg)[0]->payload, "hello");
    c->consumeAll();
  }
  EXPECT_EQ(alpha->peer("beta").counters().messagesSent - sentBefore, 1u)
      << "one copy crosses to beta for its two subscribers";
  const Got* ack = await(*pub, FrameKind::pub_ack, 1);
  ASSERT_NE(ack, nullptr);
  EXPECT_EQ(ack->errc, Errc::ok);
  EXPECT_EQ(ack->matched, 4u);
  EXPECT_EQ(ack->taken, 4u);
}

TEST_F(PubSubMesh, AStoppedSubscriberDropsItsOwnMessagesAndCostsTheOthersNothing) {
  start();
  auto stopped = client(*beta), live = client(*beta);
  stopped->subscribe(1, "feed", "", proto::SlowConsumer::drop, 2);
  live->subscribe(1, "feed");
  ASSERT_TRUE(interestReached(*alpha, 1));
  auto pub = client(*alpha);
  for (uint64_t id = 1; id <= 20; id++)
    pub->publish(id, "feed", std::string(100, 'f'));
  ASSERT_TRUE(stepUntil(loop, [&] {
    live->consumeAll();
    return live->of(FrameKind::msg).size() == 20;
  })) << "the live subscriber waited for the stopped one";
  live->consumeAll();
  for (uint64_t id = 3; id <= 20; id++) {
    const Got* ack = await(*pub, FrameKind::pub_ack, id);
    ASSERT_NE(ack, nullptr) << id;
    EXPECT_EQ(ack->errc, Errc::ok);
    EXPECT_EQ(ack->matched, 2u);
    EXPECT_EQ(ack->taken, 1u);
    EXPECT_EQ(ack->dropped, 1u) << "past its pending limit, the stopped one drops";
  }
  EXPECT_EQ(stopped->of(FrameKind::msg).size(), 2u);
  EXPECT_EQ(pub->find(FrameKind::pub_ack, 1), nullptr) << "it holds two, not yet taken";
  stopped->consumeAll();
  const Got* first = await(*pub, FrameKind::pub_ack, 1);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->taken, 2u);
}

TEST_F(PubSubMesh, AQueueGroupGivesEachMessageToOneMemberALocalOneFirst) {
  start();
  auto local = client(*alpha), b1 = client(*beta), b2 = client(*beta);
  local->subscribe(1, "work", "workers");
  b1->subscribe(1, "work", "workers");
  b2->subscribe(1, "work", "workers");
  ASSERT_NE(await(*local, FrameKind::subscribed, 1), nullptr);
  ASSERT_TRUE(interestReached(*alpha, 1)) << "beta announces the pair once";
  auto pub = client(*alpha);
  for (uint64_t id = 1; id <= 10; id++)
    pub->publish(id, "work", "job " + std::to_string(id));
  ASSERT_TRUE(stepUntil(loop, [&] { return local->of(FrameKind::msg).size() == 10; }));
  local->consumeAll();
  EXPECT_TRUE(b1->of(FrameKind::msg).empty() && b2->of(FrameKind::msg).empty())
      << "a local member takes the group's messages first";
  for (uint64_t id = 1; id <= 10; id++) {
    const Got* ack = await(*pub, FrameKind::pub_ack, id);
    ASSERT_NE(ack, nullptr);
    EXPECT_EQ(ack->matched, 1u) << "a group counts once";
    EXPECT_EQ(ack->taken, 1u);
  }
  local->unsubscribe(1);
  for (uint64_t id = 11; id <= 30; id++)
    pub->publish(id, "work", "job " + std::to_string(id));
  ASSERT_TRUE(stepUntil(loop, [&] {
    b1->consumeAll();
    b2->consumeAll();
    return b1->of(FrameKind::msg).size() + b2->of(FrameKind::msg).size() == 20;
  }));
  std::vector<std::string> seen;
  for (Raw* c : {b1.get(), b2.get()})
    for (const Got* g : c->of(FrameKind::msg))
      seen.push_back(g->payload);
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(std::unique(seen.begin(), seen.end()), seen.end()) << "a message taken twice";
  EXPECT_FALSE(b1->of(FrameKind::msg).empty());
  EXPECT_FALSE(b2->of(FrameKind::msg).empty()) << "beta's members share the stream";
}

TEST_F(PubSubMesh, ARequestGetsItsReplyFromAnotherHost) {
  start();
  auto responder = client(*beta);
  responder->subscribe(1, "svc.echo");
  ASSERT_TRUE(interestReached(*alpha, 1));
  auto requester = client(*alpha);
  requester->publish(41, "svc.echo", "ping", 5000);
  const Got* req = nullptr;
  ASSERT_TRUE(stepUntil(loop, [&] {
    auto m = responder->of(FrameKind::msg);
    return !m.empty() && (req = m[0]) != nullptr;
  }));
  EXPECT_FALSE(req->replyTo.empty()) << "a request carries its reply token";
  EXPECT_EQ(req->payload, "ping");
  responder->consumeAll();
  responder->respond(9, req->replyTo, "pong");
  const Got* reply = await(*requester, FrameKind::reply, 41);
  ASSERT_NE(reply, nullptr);
  EXPECT_EQ(reply->payload, "pong");
  EXPECT_EQ(reply->node, "beta");
  requester->consumeAll();
  ASSERT_TRUE(stepUntil(loop, [&] { return responder->of(FrameKind::ack).size() == 1; }))
      << "the responder is confirmed once the requester took the reply";
  EXPECT_EQ(requester->find(FrameKind::pub_ack, 41), nullptr) << "the reply is the outcome";
}

TEST_F(PubSubMesh, NoRespondersIsAnsweredAtOnceAndASilentResponderTimesOut) {
  start();
  auto requester = client(*alpha);
  requester->publish(1, "nobody.here", "?", 5000);
  const Got* none = await(*requester, FrameKind::pub_ack, 1, 1s);
  ASSERT_NE(none, nullptr) << "no_responders is answered at once";
  EXPECT_EQ(none->errc, Errc::no_responders);

  auto silent = client(*beta);
  silent->subscribe(1, "slow.svc");
  ASSERT_TRUE(interestReached(*alpha, 1));
  requester->publish(2, "slow.svc", "?", 200);
  const Got* late = nullptr;
  ASSERT_TRUE(stepUntil(loop, [&] {
    auto m = silent->of(FrameKind::msg);
    return !m.empty() && (late = m[0]) != nullptr;
  }));
  silent->consumeAll();
  const Got* timeout = await(*requester, FrameKind::pub_ack, 2);
  ASSERT_NE(timeout, nullptr);
  EXPECT_EQ(timeout->errc, Errc::timeout);
  // A reply after the deadline is refused, never handed to anybody.
  silent->respond(5, late->replyTo, "too late");
  ASSERT_TRUE(stepUntil(loop, [&] { return silent->of(FrameKind::error).size() == 1; }));
  EXPECT_EQ(silent->of(FrameKind::error)[0]->errc, Errc::unknown_service);
  EXPECT_TRUE(requester->of(FrameKind::reply).empty());
  EXPECT_EQ(alpha->pubsub().counters().lateReplies, 1u);
}

// A publish not settled within message_timeout says what is known: the
// local subscriptions it matched and those that took it so far.
TEST_F(PubSubMesh, APublishNotTakenInTimeSaysTimeoutWithWhatIsKnown) {
  start([](config::Config& c) { c.timers.messageTimeout = 300ms; });
  auto taker = client(*alpha);
  auto stopped = client(*alpha);
  auto publisher = client(*alpha);
  taker->subscribe(1, "feed");
  stopped->subscribe(1, "feed");
  ASSERT_TRUE(stepUntil(loop, [&] { return alpha->pubsub().subscriptions().size() == 2; }));
  publisher->publish(1, "feed", "tick");
  ASSERT_TRUE(stepUntil(loop, [&] {
    return taker->of(FrameKind::msg).size() == 1 && stopped->of(FrameKind::msg).size() == 1;
  }));
  taker->consumeAll();  // the other never takes it
  const Got* ack = await(*publisher, FrameKind::pub_ack, 1);
  ASSERT_NE(ack, nullptr);
  EXPECT_EQ(ack->errc, Errc::timeout) << ack->text;
  EXPECT_EQ(ack->matched, 2u) << "both local subscriptions matched";
  EXPECT_EQ(ack->taken, 1u);
  EXPECT_EQ(ack->dropped, 0u);
}

TEST_F(PubSubMesh, InterestIsWholeAgainOnANewConnectionAndGoesWithALostOne) {
  start();
  auto sub = client(*beta);
  sub->subscribe(1, "a.b");
  sub->subscribe(2, "c.>", "g");
  ASSERT_TRUE(interestReached(*alpha, 2));
  beta.reset();  // beta's host goes
  ASSERT_TRUE(interestReached(*alpha, 0)) << "a lost peer's interest went with it";
  auto pub = client(*alpha);
  pub->publish(1, "a.b", "x");
  const Got* ack = await(*pub, FrameKind::pub_ack, 1);
  ASSERT_NE(ack, nullptr);
  EXPECT_EQ(ack->errc, Errc::no_subscribers);
  config::Config c = meshConfig("beta", nodes, port);
  beta = std::make_unique<Daemon>(loop, c, dir + "/beta2.sock");
  auto again = client(*beta);
  again->subscribe(1, "a.b");
  ASSERT_TRUE(interestReached(*alpha, 1)) << "the new connection carries the whole interest";
  pub->publish(2, "a.b", "y");
  ASSERT_TRUE(stepUntil(loop, [&] { return again->of(FrameKind::msg).size() == 1; }));
}

TEST_F(PubSubMesh, APeerThatAnnouncesTooMuchInterestIsDisconnectedWithTheReason) {
  start([](config::Config& c) {
    if (c.node == "alpha") c.subjects.maxPeerInterest = 5;
  });
  auto sub = client(*beta);
  const uint64_t connects = alpha->peer("beta").counters().connects;
  for (uint64_t i = 1; i <= 6; i++)
    sub->subscribe(i, "p" + std::to_string(i));
  ASSERT_TRUE(stepUntil(loop, [&] { return alpha->pubsub().counters().interestRefused >= 1; }));
  EXPECT_NE(alpha->peer("beta").lastError().find("max_peer_interest"), std::string::npos)
      << alpha->peer("beta").lastError();
  ASSERT_TRUE(stepUntil(loop, [&] { return alpha->peer("beta").counters().connects > connects; }))
      << "the peer connects again";
}

TEST_F(PubSubMesh, ABlockSubscriberHoldsThePublisherAndLosesNothing) {
  start();
  auto sub = client(*beta);
  sub->subscribe(1, "firehose", "", proto::SlowConsumer::block, 4);
  ASSERT_TRUE(interestReached(*alpha, 1));
  auto pub = client(*alpha);
  const std::string payload(2000, 'b');
  for (uint64_t id = 1; id <= 200; id++)  // 400 KB: far more than the 64 KiB window
    pub->publish(id, "firehose", payload);
  stepUntil(
      loop, [] { return false; }, 300ms);
  EXPECT_LT(sub->of(FrameKind::msg).size(), 200u) << "the window holds the rest back";
  ASSERT_TRUE(stepUntil(loop,
                        [&] {
                          pub->pump();  // what the publisher's socket did not take yet
                          sub->consumeAll();
                          return sub->of(FrameKind::msg).size() == 200;
                        }))
      << "got " << sub->of(FrameKind::msg).size() << ": " <<
      [&] {
        std::string s = "acks " + std::to_string(pub->of(FrameKind::pub_ack).size());
        for (const auto& f : alpha->peer("beta").flowStats())
          s += "; flow " + f.service + " unconfirmed " + std::to_string(f.unconfirmed) +
               " queued " + std::to_string(f.queuedMessages) + (f.paused ? " paused" : "");
        beta->pubsub().subscriptions().forEach([&](const pubsub::Subscription& x) {
          s += "; sub pending " + std::to_string(x.pending) + " taken " + std::to_string(x.taken);
        });
        return s;
      }();
  sub->consumeAll();
  for (uint64_t id = 1; id <= 200; id++) {
    const Got* ack = await(*pub, FrameKind::pub_ack, id);
    ASSERT_NE(ack, nullptr) << id;
    EXPECT_EQ(ack->dropped, 0u);
    EXPECT_EQ(ack->taken, 1u);
  }
}

}  // namespace
}  // namespace rdmamsg::peer::test
