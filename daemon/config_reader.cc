// Reads the configuration off the loop (config_reader.h).
#include "daemon/config_reader.h"

#include <event2/event.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <system_error>

namespace rdmamsg {

ConfigReader::Shared::~Shared() {
  if (efd >= 0) ::close(efd);
}

ConfigReader::ConfigReader(loop::EventLoop& loop, Done done)
    : done_(std::move(done)), shared_(std::make_shared<Shared>()) {
  shared_->efd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (shared_->efd < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
  io_ = std::make_unique<loop::IoEvent>(loop, shared_->efd, EV_READ | EV_PERSIST | EV_ET,
                                        [this](short) { onReady(); });
}

ConfigReader::~ConfigReader() {
  io_.reset();
  // A name lookup may take as long as the name service wants: stopping does
  // not wait for it. The thread keeps the state it writes alive.
  if (thread_.joinable()) thread_.detach();
}

void ConfigReader::request(const std::string& path, const std::optional<std::string>& node) {
  path_ = path;
  node_ = node;
  if (thread_.joinable()) {
    again_ = true;  // served when the read under way ends
    return;
  }
  start();
}

void ConfigReader::start() {
  again_ = false;
  shared_->result.reset();
  thread_ = std::thread([shared = shared_, path = path_, node = node_] {
    shared->result.emplace(config::loadConfig(path, node));
    const uint64_t one = 1;
    while (::write(shared->efd, &one, sizeof one) < 0 && errno == EINTR) {
    }
  });
}

void ConfigReader::onReady() {
  uint64_t n = 0;
  while (::read(shared_->efd, &n, sizeof n) < 0 && errno == EINTR) {
  }
  if (!thread_.joinable()) return;
  thread_.join();  // it has written its result and is ending
  if (again_) {
    start();  // a newer SIGHUP came meanwhile: only its read counts
    return;
  }
  const config::LoadResult result = std::move(*shared_->result);
  shared_->result.reset();
  done_(result);
}

}  // namespace rdmamsg
