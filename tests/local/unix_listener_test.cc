// UnixListener start-up rules: stale sockets replaced, live ones and
// non-sockets refused, missing parent directory refused, mode applied, file
// removed on shutdown.
#include "daemon/local/unix_listener.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <cstring>
#include <fstream>

#include "test_server.h"

namespace rdmamsg::local {
namespace {

using test::TempDir;

TEST(UnixListenerTest, CreatesSocketWithModeAndRemovesIt) {
  TempDir dir;
  ListenerConfig cfg;
  cfg.path = dir.file("d.sock");
  cfg.mode = 0640;
  {
    UnixListener l(cfg);
    struct stat st {};
    ASSERT_EQ(::stat(cfg.path.c_str(), &st), 0);
    EXPECT_TRUE(S_ISSOCK(st.st_mode));
    EXPECT_EQ(st.st_mode & 0777, 0640u);
  }
  EXPECT_FALSE(std::filesystem::exists(cfg.path));
}

TEST(UnixListenerTest, ReplacesAStaleSocket) {
  TempDir dir;
  ListenerConfig cfg;
  cfg.path = dir.file("d.sock");
  // A crashed daemon leaves its socket file behind: bind, never listen, close.
  {
    UniqueFd s(::socket(AF_UNIX, SOCK_STREAM, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, cfg.path.c_str(), sizeof(addr.sun_path) - 1);
    ASSERT_EQ(::bind(s.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  }
  ASSERT_TRUE(std::filesystem::exists(cfg.path));
  EXPECT_NO_THROW(UnixListener again(cfg));
}

TEST(UnixListenerTest, RefusesALiveSocket) {
  TempDir dir;
  ListenerConfig cfg;
  cfg.path = dir.file("d.sock");
  UnixListener first(cfg);
  EXPECT_THROW(UnixListener second(cfg), std::runtime_error);
  EXPECT_TRUE(std::filesystem::exists(cfg.path));  // the live daemon keeps its socket
}

TEST(UnixListenerTest, RefusesANonSocketFile) {
  TempDir dir;
  ListenerConfig cfg;
  cfg.path = dir.file("plain");
  std::ofstream(cfg.path) << "x";
  EXPECT_THROW(UnixListener l(cfg), std::runtime_error);
}

TEST(UnixListenerTest, ParentDirectoryMustExist) {
  TempDir dir;
  ListenerConfig cfg;
  cfg.path = dir.file("missing/d.sock");
  try {
    UnixListener l(cfg);
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos);
  }
}

TEST(UnixListenerTest, UnknownGroupIsAStartupError) {
  TempDir dir;
  ListenerConfig cfg;
  cfg.path = dir.file("d.sock");
  cfg.group = "no-such-group-rdmamsg";
  EXPECT_THROW(UnixListener l(cfg), std::runtime_error);
}

}  // namespace
}  // namespace rdmamsg::local
