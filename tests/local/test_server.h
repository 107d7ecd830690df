// Test support: a LocalServer with a LoopbackHandler in a temporary
// directory — stepped by the test (LocalFixture) or run on its own thread
// (ThreadedServer, for blocking clients and the CLI).
#pragma once

#include <event2/event.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "daemon/local/local_server.h"
#include "daemon/loop/event_loop.h"
#include "daemon/loop/events.h"
#include "loopback_handler.h"

namespace rdmamsg::test {

// A fresh directory under /tmp, removed on destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "rdmamsg-test-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline local::LocalServerConfig testConfig(const std::string& socket, uint32_t maxMessage) {
  local::LocalServerConfig cfg;
  cfg.listener.path = socket;
  cfg.listener.mode = 0600;
  cfg.nodeName = "nodeA";
  cfg.maxMessageSize = maxMessage;
  return cfg;
}

// The server, its handler and loop, running on a thread until destroyed.
class ThreadedServer {
 public:
  explicit ThreadedServer(uint32_t maxMessage = 65536)
      : socket_(dir_.file("rdmamsgd.sock")), handler_("nodeA") {
    server_ =
        std::make_unique<local::LocalServer>(loop_, testConfig(socket_, maxMessage), handler_);
    handler_.attach(*server_);
    if (::pipe(stopPipe_) != 0) throw std::runtime_error("pipe");
    stop_ = std::make_unique<loop::IoEvent>(loop_, stopPipe_[0], EV_READ,
                                            [this](short) { loop_.exit(); });
    thread_ = std::thread([this] { EXPECT_TRUE(loop_.run().ok()); });
  }
  ~ThreadedServer() {
    (void)::write(stopPipe_[1], "x", 1);
    thread_.join();
    stop_.reset();
    server_.reset();
    ::close(stopPipe_[0]);
    ::close(stopPipe_[1]);
  }
  const std::string& socket() const { return socket_; }
  const TempDir& dir() const { return dir_; }

 private:
  TempDir dir_;
  std::string socket_;
  loop::EventLoop loop_;
  LoopbackHandler handler_;
  std::unique_ptr<local::LocalServer> server_;
  int stopPipe_[2] = {-1, -1};
  std::unique_ptr<loop::IoEvent> stop_;
  std::thread thread_;
};

}  // namespace rdmamsg::test
