// Reads the configuration off the loop (config_reader.h).
#include "daemon/config_reader.h"

#include <event2/event.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <system_error>

namespace rdmamsg {

ConfigReader::ConfigReader(loop::EventLoop& loop, Done done) : done_(std::move(done)) {
  efd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (efd_ < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
  io_ = std::make_unique<loop::IoEvent>(loop, efd_, EV_READ | EV_PERSIST | EV_ET,
                                        [this](short) { onReady(); });
}

ConfigReader::~ConfigReader() {
  if (thread_.joinable()) thread_.join();
  io_.reset();
  ::close(efd_);
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
  result_.reset();
  thread_ = std::thread([this, path = path_, node = node_] {
    result_.emplace(config::loadConfig(path, node));
    const uint64_t one = 1;
    while (::write(efd_, &one, sizeof one) < 0 && errno == EINTR) {
    }
  });
}

void ConfigReader::onReady() {
  uint64_t n = 0;
  while (::read(efd_, &n, sizeof n) < 0 && errno == EINTR) {
  }
  if (!thread_.joinable()) return;
  thread_.join();  // it has written its result and is ending
  if (again_) {
    start();  // a newer SIGHUP came meanwhile: only its read counts
    return;
  }
  const config::LoadResult result = std::move(*result_);
  result_.reset();
  done_(result);
}

}  // namespace rdmamsg
