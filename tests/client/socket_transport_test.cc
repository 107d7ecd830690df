// SocketTransport (client/socket_transport.h) against a listening Unix
// socket of the test's own: bytes go both ways without waiting, a read
// with nothing there says so, the peer's end is not_connected, poll()
// and pollWith() return as soon as their socket or fd is readable, every
// system call is counted, and a connect that cannot succeed says why.
#include "client/socket_transport.h"

#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace rdmamsg::client {
namespace {

using namespace std::chrono_literals;

// A listening socket in a private directory, removed with it.
class Listener {
 public:
  Listener() {
    char dir[] = "/tmp/rdmamsg-transport-XXXXXX";
    if (::mkdtemp(dir) == nullptr) std::abort();
    dir_ = dir;
    path_ = dir_ + "/sock";
    fd_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strcpy(addr.sun_path, path_.c_str());
    if (::bind(fd_.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(fd_.get(), 4) != 0)
      std::abort();
  }
  ~Listener() {
    fd_.reset();
    ::unlink(path_.c_str());
    ::rmdir(dir_.c_str());
  }
  const std::string& path() const { return path_; }
  UniqueFd accept() { return UniqueFd(::accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC)); }

 private:
  std::string dir_, path_;
  UniqueFd fd_;
};

std::string text(const ByteBuffer& b) {
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

TEST(SocketTransportTest, BytesGoBothWaysWithoutWaiting) {
  Listener listener;
  SocketTransport t;
  ASSERT_TRUE(t.connect(listener.path(), 1s).ok());
  EXPECT_TRUE(t.isOpen());
  UniqueFd peer = listener.accept();
  ASSERT_TRUE(peer.valid());

  ByteBuffer out;
  out.append(std::string_view("to the daemon"));
  ASSERT_TRUE(t.write(out).ok());
  EXPECT_TRUE(out.empty()) << "what the socket took is consumed";
  char got[64] = {};
  ASSERT_EQ(::recv(peer.get(), got, sizeof got, 0), 13);
  EXPECT_EQ(std::string(got, 13), "to the daemon");

  ByteBuffer in;
  EXPECT_EQ(t.read(in, 4096).value(), 0u) << "nothing there: no wait";
  ASSERT_EQ(::send(peer.get(), "to the client", 13, 0), 13);
  ASSERT_TRUE(t.poll(false, 5000).ok());
  EXPECT_EQ(t.read(in, 4096).value(), 13u);
  EXPECT_EQ(text(in), "to the client");

  EXPECT_EQ(t.counters().socketWrites, 1u);
  EXPECT_EQ(t.counters().socketReads, 2u);
  EXPECT_EQ(t.counters().polls, 1u);
  EXPECT_EQ(t.counters().doorbellRings + t.counters().doorbellReads, 0u);
}

TEST(SocketTransportTest, ThePeersEndIsNotConnected) {
  Listener listener;
  SocketTransport t;
  ASSERT_TRUE(t.connect(listener.path(), 1s).ok());
  listener.accept().reset();
  ByteBuffer in;
  ASSERT_TRUE(t.poll(false, 5000).ok());
  Result<size_t> n = t.read(in, 4096);
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), Errc::not_connected);
  EXPECT_EQ(n.status().message(), "rdmamsgd closed the connection");
}

TEST(SocketTransportTest, PollWithSaysWhichOfTheTwoIsReadable) {
  Listener listener;
  SocketTransport t;
  ASSERT_TRUE(t.connect(listener.path(), 1s).ok());
  UniqueFd peer = listener.accept();
  UniqueFd doorbell(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  ASSERT_TRUE(doorbell.valid());
  const uint64_t one = 1;
  ASSERT_EQ(::write(doorbell.get(), &one, sizeof one), 8);
  Result<bool> socketReadable = t.pollWith(doorbell.get(), 5000);
  ASSERT_TRUE(socketReadable.ok());
  EXPECT_FALSE(*socketReadable) << "woken by the doorbell";
  ASSERT_EQ(::send(peer.get(), "x", 1, 0), 1);
  socketReadable = t.pollWith(doorbell.get(), 5000);
  ASSERT_TRUE(socketReadable.ok());
  EXPECT_TRUE(*socketReadable);
}

TEST(SocketTransportTest, AConnectThatCannotSucceedSaysWhy) {
  SocketTransport t;
  Status st = t.connect("/nonexistent/rdmamsg/rdmamsgd.sock", 1s);
  EXPECT_EQ(st.code(), Errc::io_error);
  EXPECT_NE(st.message().find("/nonexistent/rdmamsg/rdmamsgd.sock"), std::string::npos)
      << st.toString();
  st = t.connect("/tmp/" + std::string(200, 'x'), 1s);
  EXPECT_EQ(st.code(), Errc::bad_request);
  EXPECT_NE(st.message().find("socket path too long"), std::string::npos) << st.toString();
}

}  // namespace
}  // namespace rdmamsg::client
