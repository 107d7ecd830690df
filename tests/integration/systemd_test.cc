// Integration: rdmamsgd speaks the sd_notify protocol to a service manager.
// The test plays systemd: it binds the notification socket (NOTIFY_SOCKET)
// and sets WATCHDOG_USEC, then reads what the daemon reports.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "harness.h"

namespace rdmamsg::itest {
namespace {

// The service manager's end: a datagram socket at `path`.
class NotifySocket {
 public:
  explicit NotifySocket(const std::string& path) : path_(path) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
    bound_ = fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~NotifySocket() {
    if (fd_ >= 0) ::close(fd_);
    ::unlink(path_.c_str());
  }
  bool bound() const { return bound_; }
  // The next datagram, or "" when none comes within `timeout`.
  std::string next(std::chrono::milliseconds timeout) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) != 1) return "";
    char buf[4096];
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  }
  // Reads datagrams until one contains `text`; false at the deadline.
  bool waitFor(const std::string& text, std::chrono::milliseconds timeout) {
    bool found = false;
    readFor(timeout, [&](const std::string& d) {
      found = d.find(text) != std::string::npos;
      return found;
    });
    return found;
  }
  // Counts WATCHDOG=1 datagrams arriving within `window`.
  int watchdogsWithin(std::chrono::milliseconds window) {
    int n = 0;
    readFor(window, [&](const std::string& d) {
      n += d.find("WATCHDOG=1") != std::string::npos ? 1 : 0;
      return false;
    });
    return n;
  }

 private:
  // Hands each datagram arriving within `window` to `f` until it returns true.
  template <typename F>
  void readFor(std::chrono::milliseconds window, F&& f) {
    const auto deadline = std::chrono::steady_clock::now() + window;
    for (int i = 0; i < 10000; ++i) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return;
      if (std::string d = next(left); !d.empty() && f(d)) return;
    }
  }

  std::string path_;
  int fd_ = -1;
  bool bound_ = false;
};

class Systemd : public ::testing::Test {
 protected:
  void start(const std::vector<std::string>& env) {
    notify_ = std::make_unique<NotifySocket>(scratch_.file("notify"));
    ASSERT_TRUE(notify_->bound());
    MeshOptions o;
    o.nodeWrapper["alpha"] = {"/usr/bin/env", "NOTIFY_SOCKET=" + scratch_.file("notify")};
    for (const auto& e : env)
      o.nodeWrapper["alpha"].push_back(e);
    cluster_ = std::make_unique<Cluster>(std::vector<std::string>{"alpha", "beta"}, o);
    ASSERT_TRUE(cluster_->start());
  }
  TempDir scratch_;
  std::unique_ptr<NotifySocket> notify_;
  std::unique_ptr<Cluster> cluster_;
};

TEST_F(Systemd, ReadyStatusAndStoppingAreReported) {
  start({});
  EXPECT_TRUE(notify_->waitFor("READY=1", 10s));
  ASSERT_TRUE(cluster_->waitFullMesh(10s));
  EXPECT_TRUE(notify_->waitFor("STATUS=1/1 peers established", 10s));
  auto code = (*cluster_)["alpha"].stop(10s);
  EXPECT_EQ(code, 0);
  EXPECT_TRUE(notify_->waitFor("STOPPING=1", 1s));
}

// Under WatchdogSec= the loop pets the watchdog at half the interval, and
// only while it turns: a stopped daemon sends nothing, so systemd would
// restart it.
TEST_F(Systemd, TheWatchdogIsPettedOnlyWhileTheLoopTurns) {
  start({"WATCHDOG_USEC=200000"});  // 200 ms: WATCHDOG=1 every 100 ms
  ASSERT_TRUE(notify_->waitFor("READY=1", 10s));
  EXPECT_GE(notify_->watchdogsWithin(1s), 4);
  EXPECT_TRUE((*cluster_)["alpha"].waitLog("systemd watchdog: notifying every 100 ms", 5s));

  (*cluster_)["alpha"].signal(SIGSTOP);  // a wedged loop, as systemd sees it
  notify_->watchdogsWithin(200ms);       // what was sent before the stop
  EXPECT_EQ(notify_->watchdogsWithin(1s), 0);
  (*cluster_)["alpha"].signal(SIGCONT);
  EXPECT_TRUE(notify_->waitFor("WATCHDOG=1", 5s)) << "the watchdog did not resume";
}

TEST_F(Systemd, NoWatchdogWithoutWatchdogSec) {
  start({});
  ASSERT_TRUE(notify_->waitFor("READY=1", 10s));
  EXPECT_EQ(notify_->watchdogsWithin(1s), 0);
}

}  // namespace
}  // namespace rdmamsg::itest
