// LocalServer over real Unix sockets: handshake, registration, routing
// through the loopback handler, errors to the sender, protocol violations.
#include <sys/socket.h>

#include <unistd.h>
#include "daemon/local/session.h"

#include "local_fixture.h"

namespace rdmamsg::test {
namespace {

using proto::FrameKind;

class LocalServerTest : public LocalFixture {};

TEST_F(LocalServerTest, WelcomeCarriesNodeAndMaxMessageSize) {
  RawClient c(server_->socketPath());
  proto::encodeHello(c.out(), "t");
  c.write();
  Got w = next(c);
  EXPECT_EQ(w.kind, FrameKind::welcome);
  EXPECT_EQ(w.node, "nodeA");
}

TEST_F(LocalServerTest, PeerCredentialsAreRecorded) {
  auto c = connect();
  ASSERT_EQ(server_->sessionCount(), 1u);
  const local::PeerCred* cred = server_->peerCred(server_->sessionIds().front());
  ASSERT_NE(cred, nullptr);
  EXPECT_EQ(cred->pid, ::getpid());
  EXPECT_EQ(cred->uid, ::getuid());
  EXPECT_EQ(cred->gid, ::getgid());
}

TEST_F(LocalServerTest, RegisterAndDuplicateRejected) {
  auto a = connect();
  auto b = connect();
  Got r = registerService(*a, "echo");
  EXPECT_EQ(r.kind, FrameKind::registered);
  EXPECT_EQ(r.service, "echo");
  Got dup = registerService(*b, "echo");
  EXPECT_EQ(dup.kind, FrameKind::error);
  EXPECT_EQ(dup.errc, Errc::duplicate_service);
  EXPECT_EQ(dup.inReplyTo, static_cast<uint8_t>(FrameKind::reg));
  EXPECT_NE(dup.text.find("echo"), std::string::npos);
  // The same client registering twice is refused too.
  EXPECT_EQ(registerService(*a, "echo").errc, Errc::duplicate_service);
}

TEST_F(LocalServerTest, SendToOwnNodeIsDeliveredWithSenderAndAcked) {
  auto listener = connect();
  auto sender = connect();
  ASSERT_EQ(registerService(*listener, "echo").kind, FrameKind::registered);
  ASSERT_EQ(registerService(*sender, "client").kind, FrameKind::registered);
  send(*sender, 17, "nodeA", "echo", "hello");
  Got d = next(*listener);
  EXPECT_EQ(d.kind, FrameKind::deliver);
  EXPECT_EQ(d.node, "nodeA");
  EXPECT_EQ(d.service, "client");  // the sender's registered service by default
  EXPECT_EQ(d.otherService, "echo");
  EXPECT_EQ(d.payload, "hello");
  // Acknowledged only once the listener says its application took it.
  for (int i = 0; i < 20; ++i)
    loop_.runOnce(std::chrono::milliseconds(1));
  proto::Frame f;
  EXPECT_FALSE(sender->next(f)) << "acknowledged before the listener took it";
  listener->consumeAll();
  Got a = next(*sender);
  EXPECT_EQ(a.kind, FrameKind::ack);
  EXPECT_EQ(a.acks, std::vector<uint64_t>{17});
}

TEST_F(LocalServerTest, AckRangesFollowTheIdsTheClientChose) {
  auto c = connect();
  ASSERT_EQ(registerService(*c, "self").kind, FrameKind::registered);
  for (uint64_t id : {1, 2, 3, 10, 11, 7})
    proto::encodeSend(c->out(), id, "nodeA", "self", "", {});
  c->write();
  std::vector<uint64_t> acked;
  size_t ranges = 0;
  for (int i = 0; i < 6; ++i)
    ASSERT_EQ(next(*c).kind, FrameKind::deliver);
  c->consumeAll();
  while (acked.size() < 6) {
    Got g = next(*c);
    ASSERT_EQ(g.kind, FrameKind::ack);
    ranges += g.ackRanges;
    acked.insert(acked.end(), g.acks.begin(), g.acks.end());
  }
  EXPECT_EQ(acked, (std::vector<uint64_t>{1, 2, 3, 10, 11, 7}));
  EXPECT_EQ(ranges, 3u);  // 1-3, 10-11, 7
}

TEST_F(LocalServerTest, AcksOfOneTurnAreBatched) {
  auto c = connect();
  ASSERT_EQ(registerService(*c, "self").kind, FrameKind::registered);
  for (uint64_t id = 1; id <= 100; ++id) {
    proto::encodeSend(c->out(), id, "nodeA", "self", "", {});
  }
  c->write();  // one write: the server reads all 100 in one turn
  std::vector<uint64_t> acked;
  size_t ackFrames = 0;
  for (int i = 0; i < 100; ++i)
    ASSERT_EQ(next(*c).kind, FrameKind::deliver);
  c->consumeAll();  // the application took all 100 at once
  while (acked.size() < 100) {
    Got g = next(*c);
    ASSERT_EQ(g.kind, FrameKind::ack);
    ++ackFrames;
    EXPECT_EQ(g.ackRanges, 1u) << "consecutive ids make one range";
    acked.insert(acked.end(), g.acks.begin(), g.acks.end());
  }
  for (uint64_t i = 0; i < 100; ++i)
    EXPECT_EQ(acked[i], i + 1);
  EXPECT_LT(ackFrames, 10u);
}

TEST_F(LocalServerTest, ErrorsGoBackToTheSenderNamingTheFault) {
  auto c = connect();
  send(*c, 1, "nodeX", "echo", "x");
  Got e = next(*c);
  EXPECT_EQ(e.kind, FrameKind::error);
  EXPECT_EQ(e.msgId, 1u);
  EXPECT_EQ(e.errc, Errc::unknown_node);
  EXPECT_NE(e.text.find("nodeX"), std::string::npos);

  send(*c, 2, "nodeA", "nobody", "x");
  e = next(*c);
  EXPECT_EQ(e.msgId, 2u);
  EXPECT_EQ(e.errc, Errc::unknown_service);
  EXPECT_NE(e.text.find("nobody"), std::string::npos);

  send(*c, 3, "nodeA", "nobody", std::string(kMaxMessage + 1, 'x'));
  e = next(*c);
  EXPECT_EQ(e.msgId, 3u);
  EXPECT_EQ(e.errc, Errc::too_large);

  send(*c, 4, "nodeA", "nobody", "x", "notmine");
  e = next(*c);
  EXPECT_EQ(e.msgId, 4u);
  EXPECT_EQ(e.errc, Errc::bad_request);

  send(*c, 0, "nodeA", "nobody", "x");
  e = next(*c);
  EXPECT_EQ(e.errc, Errc::bad_request);
  // None of these closed the connection.
  EXPECT_EQ(server_->sessionCount(), 1u);
}

TEST_F(LocalServerTest, GarbageClientIsDisconnectedOthersKeepWorking) {
  auto good = connect();
  auto bad = connect();
  ASSERT_EQ(registerService(*good, "echo").kind, FrameKind::registered);
  const char garbage[] = "GET / HTTP/1.1\r\n\r\n";
  bad->out().append(garbage, sizeof(garbage));
  bad->write();
  Got e = next(*bad);
  EXPECT_EQ(e.kind, FrameKind::error);
  EXPECT_EQ(e.errc, Errc::protocol_error);
  EXPECT_TRUE(stepUntil([&] { return bad->sawEof(); }));
  EXPECT_TRUE(stepUntil([&] { return handler_.closed.size() == 1; }));
  send(*good, 5, "nodeA", "echo", "still here");
  EXPECT_EQ(next(*good).payload, "still here");
  good->consumeAll();
  EXPECT_EQ(next(*good).acks, std::vector<uint64_t>{5});
}

TEST_F(LocalServerTest, OversizedFrameIsAProtocolErrorForThatClientOnly) {
  auto c = connect();
  // A header claiming far more than the maximum frame; no body follows.
  const uint8_t hdr[] = {0, 0, 0, 0x40, proto::kProtocolVersion, 6, 0, 0};
  c->out().append(hdr, sizeof(hdr));
  c->write();
  Got e = next(*c);
  EXPECT_EQ(e.errc, Errc::protocol_error);
  EXPECT_TRUE(stepUntil([&] { return c->sawEof(); }));
  auto other = connect();
  EXPECT_EQ(server_->sessionCount(), 1u);
}

TEST_F(LocalServerTest, FramesBeforeHelloAreRejected) {
  RawClient c(server_->socketPath());
  proto::encodeRegister(c.out(), "svc");
  c.write();
  Got e = next(c);
  EXPECT_EQ(e.errc, Errc::protocol_error);
  EXPECT_TRUE(stepUntil([&] { return c.sawEof(); }));
  EXPECT_TRUE(handler_.closed.empty());  // the handler never saw that session
}

TEST_F(LocalServerTest, ClosingFreesServicesAndNotifiesTheHandler) {
  auto a = connect();
  ASSERT_EQ(registerService(*a, "svc").kind, FrameKind::registered);
  a.reset();
  EXPECT_TRUE(stepUntil([&] { return handler_.closed.size() == 1; }));
  auto b = connect();
  EXPECT_EQ(registerService(*b, "svc").kind, FrameKind::registered);
}

TEST_F(LocalServerTest, ByeClosesOrderly) {
  auto a = connect();
  proto::encodeBye(a->out());
  a->write();
  EXPECT_TRUE(stepUntil([&] { return a->sawEof(); }));
  EXPECT_TRUE(stepUntil([&] { return handler_.closed.size() == 1; }));
}

TEST_F(LocalServerTest, StatusReplyIsTheHandlersJson) {
  auto c = connect();
  proto::encodeStatusRequest(c->out());
  c->write();
  Got s = next(*c);
  EXPECT_EQ(s.kind, FrameKind::status_reply);
  EXPECT_NE(s.text.find("\"node\":\"nodeA\""), std::string::npos);
}

TEST_F(LocalServerTest, CloseAllSendsTheReason) {
  auto c = connect();
  server_->closeAll(Status(Errc::shutting_down, "daemon stopping"));
  Got e = next(*c);
  EXPECT_EQ(e.errc, Errc::shutting_down);
  EXPECT_TRUE(stepUntil([&] { return c->sawEof(); }));
}

TEST_F(LocalServerTest, ClientThatNeverSaysHelloIsDisconnected) {
  auto cfg = testConfig(dir_.file("hello.sock"), kMaxMessage);
  cfg.helloTimeout = std::chrono::milliseconds(100);
  restart(std::move(cfg));
  RawClient silent(server_->socketPath());
  ASSERT_TRUE(silent.connected());
  EXPECT_TRUE(stepUntil([&] { return silent.sawEof(); }, std::chrono::seconds(5)))
      << "a connection without HELLO is kept open";
  EXPECT_TRUE(stepUntil([&] { return server_->sessionCount() == 0; }));
  auto c = connect();  // others are served as before
  EXPECT_EQ(server_->sessionCount(), 1u);
}

// A session's state changes only along its machine's edges; anything else
// is a bug and stops the daemon loudly, as ConnState does.
TEST(SessionStateTest, OnlyTheMachinesEdgesAreTaken) {
  loop::EventLoop loop;
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
  UniqueFd other(sv[1]);
  int marks = 0;
  local::Session s(loop, 1, UniqueFd(sv[0]), local::PeerCred{}, 1024, 8, std::chrono::seconds(5),
                   [&] { ++marks; });
  EXPECT_EQ(s.state(), local::Session::State::awaiting_hello);
  // Bytes from the client only mark the session; its owner parses them.
  ASSERT_EQ(::write(other.get(), "x", 1), 1);
  for (int i = 0; i < 10 && marks == 0; i++)
    loop.runOnce(std::chrono::milliseconds(10));
  EXPECT_EQ(marks, 1);
  EXPECT_EQ(s.input().size(), 1u);
  s.helloReceived();
  EXPECT_EQ(s.state(), local::Session::State::offering);
  s.stayOnSocket();
  EXPECT_EQ(s.state(), local::Session::State::socket)
      << "the first frame after HELLO that is not SHM_OFFER";
  EXPECT_DEATH(s.helloReceived(), "invalid state change socket -> offering");
  s.close(Status());
  EXPECT_EQ(s.state(), local::Session::State::closing);
  EXPECT_DEATH(s.helloReceived(), "invalid state change closing -> offering");
}

}  // namespace
}  // namespace rdmamsg::test
