// Test support: a listening application that takes every message as it
// arrives. A thread of its own calls receive() — so the senders are
// confirmed, as they are for any application that keeps up — and hands the
// messages to the test, in order, through receive() below.
//
// Tests of listeners that do NOT take their messages use a plain Client.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "rdmamsg/client.h"

namespace rdmamsg::test {

class Taker {
 public:
  // Connects to `socket` and registers `service`; nullptr (and `why`) on failure.
  static std::unique_ptr<Taker> start(const std::string& socket, const std::string& service,
                                      Status* why = nullptr) {
    Result<Client> c = Client::connect(socket);
    Status st = c ? c->registerService(service) : c.status();
    if (!st.ok()) {
      if (why != nullptr) *why = st;
      return nullptr;
    }
    return std::unique_ptr<Taker>(new Taker(std::move(*c)));
  }

  ~Taker() {
    stop_ = true;
    thread_.join();
  }
  Taker(const Taker&) = delete;
  Taker& operator=(const Taker&) = delete;

  // The next message taken, waiting up to `timeout`; timeout, or the error
  // that ended the connection once every message before it was handed over.
  Status receive(Message& out, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, timeout, [this] { return !taken_.empty() || !ended_.ok(); }))
      return Status(Errc::timeout, "no message taken in time");
    if (taken_.empty()) return ended_;
    out = std::move(taken_.front());
    taken_.pop_front();
    return {};
  }
  // Messages taken so far and not yet handed to the test.
  size_t waiting() const {
    std::lock_guard lock(mu_);
    return taken_.size();
  }

 private:
  explicit Taker(Client c) : client_(std::move(c)), thread_([this] { run(); }) {}

  void run() {
    while (!stop_) {
      Message m;
      Status st = client_.receive(m, std::chrono::milliseconds(50));
      if (st.code() == Errc::timeout) continue;
      std::lock_guard lock(mu_);
      if (st.ok()) {
        taken_.push_back(std::move(m));
      } else {
        ended_ = st;
        stop_ = true;
      }
      cv_.notify_all();
    }
    client_.close();
  }

  Client client_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Message> taken_;
  Status ended_;
  std::atomic<bool> stop_{false};
  std::thread thread_;  // last: started once everything else exists
};

}  // namespace rdmamsg::test
