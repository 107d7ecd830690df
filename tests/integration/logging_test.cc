// Integration: logging never blocks the daemon's loop. A daemon whose stderr
// is a pipe that nobody reads (a stalled journal, a stopped terminal) keeps
// serving; the lines it cannot write are dropped and counted in its status.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "harness.h"

namespace rdmamsg::itest {
namespace {

// Connects to the daemon's socket and hangs up at once: at debug level the
// daemon logs a line for the connection and one for the disconnection.
// False when the daemon's backlog is full (it is not accepting).
bool connectAndHangUp(const std::string& socket) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return false;
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, socket.c_str(), sizeof a.sun_path - 1);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

uint64_t logDropped(const Json& s) {
  return s.contains("log") ? s["log"].value("dropped", uint64_t{0}) : 0;
}

TEST(Logging, AStalledLogReaderNeverStallsTheDaemon) {
  TempDir scratch;
  const std::string fifo = scratch.file("stderr");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  // The reading end is open (so the daemon's open succeeds) and never read
  // until the end; its buffer is made as small as the kernel allows.
  int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(reader, 0) << std::strerror(errno);
  ::fcntl(reader, F_SETPIPE_SZ, 4096);

  MeshOptions o;
  o.logLevel = "debug";
  o.nodeWrapper["alpha"] = {"/bin/sh", "-c", "exec \"$@\" 2>>" + fifo, "sh"};
  Cluster c({"alpha", "beta"}, o);
  ASSERT_TRUE(c.start());
  ASSERT_TRUE(c.waitFullMesh());

  // Far more lines than the pipe and the daemon's queue hold together.
  // Rounds end early when the daemon's backlog is full (connect would
  // block); bounded in count and time.
  bool dropping = false;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  for (int round = 0; round < 500 && !dropping && std::chrono::steady_clock::now() < deadline;
       ++round) {
    for (int i = 0; i < 1000; ++i)
      if (!connectAndHangUp(c.socket("alpha"))) break;  // the status request below tells why
    auto s = statusOf(c.socket("alpha"), 5s);
    ASSERT_TRUE(s) << "the daemon stopped answering while its log was not read";
    dropping = logDropped(*s) > 0;
  }
  EXPECT_TRUE(dropping) << "no log line was counted as dropped";

  // Still serving: messages cross the mesh while nobody reads the log.
  auto r = runCli(c.dir(), {"--socket", c.socket("alpha"), "send", "beta/nowhere", "x"});
  EXPECT_NE(r.err.find("unknown_service"), std::string::npos) << r.err;
  EXPECT_TRUE(statusOf(c.socket("alpha"), 5s));

  // The log is read again: the daemon writes what it still holds and stops.
  int flags = ::fcntl(reader, F_GETFL);
  ::fcntl(reader, F_SETFL, flags & ~O_NONBLOCK);
  std::string tail;
  std::thread drain([&] {
    char buf[65536];
    for (int i = 0; i < 100000; ++i) {
      pollfd p{reader, POLLIN, 0};
      if (::poll(&p, 1, 20000) != 1) return;
      ssize_t n = ::read(reader, buf, sizeof buf);
      if (n <= 0) return;  // EOF: every writer has closed
      tail.append(buf, static_cast<size_t>(n));
      if (tail.size() > (1u << 20)) tail.erase(0, tail.size() - (1u << 19));
    }
  });
  EXPECT_EQ(c["alpha"].stop(10s), 0);
  drain.join();
  ::close(reader);
  EXPECT_NE(tail.find("rdmamsgd stopped"), std::string::npos)
      << "the last lines were not written: " << tail;
}

}  // namespace
}  // namespace rdmamsg::itest
