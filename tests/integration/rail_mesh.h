// Test support for the rails tests (rails_test.cc): two daemons on two
// hosts joined by two rails (netns_hosts.h), and a confirmed stream between
// them whose every outcome and delivery is recorded.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "harness.h"
#include "netns_hosts.h"
#include "rdmamsg/client.h"
#include "tests/support/wait.h"

namespace rdmamsg::itest {

struct RailMesh {
  TempDir dir;
  TwoHosts hosts{2};
  std::unique_ptr<DaemonProcess> d[2];
  const char* names[2] = {"alpha", "beta"};
  uint16_t port = 7471;
  std::string extra;  // more of the mesh file

  std::string socket(int i) const { return dir.file(std::string(names[i]) + ".sock"); }
  std::string rails(int host) const {
    return "[" + TwoHosts::ip(host, 0) + ":" + std::to_string(port) + ", " + TwoHosts::ip(host, 1) +
           ":" + std::to_string(port) + "]";
  }

  bool start() { return start(0) && start(1); }
  // One daemon; one mesh file for both hosts, each node listing its two rails.
  bool start(int i) {
    std::string y = "node: " + std::string(names[i]) + "\nsocket: " + socket(i) + "\npeers:\n";
    for (int j = 0; j < 2; j++)
      y += "  - name: " + std::string(names[j]) + "\n    address: " + rails(j) + "\n";
    y += "heartbeat_interval: 200ms\nheartbeat_timeout: 1s\nreconnect_backoff_min: 50ms\n"
         "reconnect_backoff_max: 1s\nconnect_timeout: 2s\nmessage_timeout: 10s\n" +
         extra;
    writeFile(dir.file(std::string(names[i]) + ".yaml"), y);
    d[i] = std::make_unique<DaemonProcess>(names[i], dir.file(std::string(names[i]) + ".yaml"),
                                           socket(i), dir.file(std::string(names[i]) + ".log"));
    d[i]->setWrapper({ipBinary(), "netns", "exec", hosts.ns(i), "/usr/bin/env",
                      "SOFTRDMA_DEVICES=" + hosts.devices(i)});
    return d[i]->start(10s);
  }
  // Both ends established over `link`: each sees the other's address on it.
  bool connectedOver(int link, std::chrono::milliseconds timeout) {
    for (int i = 0; i < 2; i++) {
      const std::string other = names[1 - i];
      const std::string prefix = TwoHosts::ip(1 - i, link) + ":";
      if (!waitForStatus(
              socket(i),
              [&](const Json& s) {
                const Json* p = peerEntry(s, other);
                return p != nullptr && p->value("state", "") == "established" &&
                       p->value("remote_address", "").rfind(prefix, 0) == 0;
              },
              timeout))
        return false;
    }
    return true;
  }
  // The rail alpha's connection to beta runs over, once both are
  // established (a dial that failed while a daemon was starting may have
  // moved them to rail 1); -1 if they are not.
  int railInUse(std::chrono::milliseconds timeout) {
    for (int link = 0; link < 2; link++)
      if (connectedOver(link, link == 0 ? timeout : 1s)) return link;
    return -1;
  }
  // Alpha has dialed beta `n` times (within `timeout`).
  bool alphaDialed(int n, std::chrono::milliseconds timeout) {
    return waitForStatus(
        socket(0),
        [&](const Json& s) {
          const Json* p = peerEntry(s, "beta");
          return p != nullptr && p->value("dials", 0) >= n;
        },
        timeout);
  }
  std::string logs() const { return (d[0] ? d[0]->log() : "") + (d[1] ? d[1]->log() : ""); }
};

inline std::span<const std::byte> bytes(std::string_view s) {
  return std::as_bytes(std::span(s));
}

// Messages from alpha's client to beta's service "svc", with every outcome
// and every delivery recorded. Each is "mN", followed by ':' and `pad`
// bytes when padded (larger than a buffer: sent in fragments).
class Stream {
 public:
  explicit Stream(size_t pad = 0) : pad_(pad) {}
  bool open(const RailMesh& m) {
    auto l = Client::connect(m.socket(1));
    auto s = Client::connect(m.socket(0));
    if (!l || !s || !l->registerService("svc").ok()) return false;
    listener_.emplace(std::move(*l));
    sender_.emplace(std::move(*s));
    return true;
  }
  void send(int n) {
    for (int i = 0; i < n; i++) {
      std::string text = "m" + std::to_string(++next_);
      const std::string payload = pad_ == 0 ? text : text + ":" + std::string(pad_, 'p');
      // Never waiting: the listener reads (pump()) while the flow is held.
      const auto deadline = std::chrono::steady_clock::now() + 10s;
      Result<uint64_t> id = sender_->trySend("beta", "svc", bytes(payload));
      while (!id && id.status().code() == Errc::would_block &&
             std::chrono::steady_clock::now() < deadline) {
        pump();
        id = sender_->trySend("beta", "svc", bytes(payload));
      }
      ASSERT_TRUE(id) << id.status().toString();
      sent_[*id] = text;
    }
    (void)sender_->flush(5s);
  }
  void pump() {
    Completion comp;
    while (sender_->pollCompletion(comp)) {
      outcome_[comp.msgId] = comp.status;
      when_[comp.msgId] = std::chrono::steady_clock::now();
    }
    Message msg;
    while (listener_->tryReceive(msg)) {
      const std::string_view got = msg.text();
      const std::string text(got.substr(0, got.find(':')));
      EXPECT_EQ(got.size(), pad_ == 0 ? text.size() : text.size() + 1 + pad_) << text;
      received_.insert(text);
      order_.push_back(std::stoi(text.substr(1)));
    }
    (void)sender_->processIo();
    (void)listener_->processIo();
  }
  bool settle(std::chrono::milliseconds timeout) {
    return test::waitFor([&] { return pump(), outcome_.size() == sent_.size(); }, timeout);
  }
  size_t sent() const { return sent_.size(); }
  uint64_t lastId() const { return sent_.empty() ? 0 : sent_.rbegin()->first; }
  // When the first outcome of a message after `id` came, and what it was.
  std::optional<std::pair<std::chrono::steady_clock::time_point, Status>> firstOutcomeAfter(
      uint64_t id) const {
    std::optional<std::pair<std::chrono::steady_clock::time_point, Status>> first;
    for (auto it = when_.upper_bound(id); it != when_.end(); ++it)
      if (!first || it->second < first->first) first.emplace(it->second, outcome_.at(it->first));
    return first;
  }
  size_t confirmed() const {
    size_t n = 0;
    for (const auto& [id, st] : outcome_)
      n += st.ok() ? 1 : 0;
    return n;
  }
  // Every failure is the peer's loss (nothing else); every confirmed
  // message was received once; nothing was received twice or unsent.
  void expectConsistent() {
    test::waitFor([&] { return pump(), received_.size() >= confirmed(); }, 5s);
    std::set<std::string> texts;
    for (const auto& [id, t] : sent_)
      texts.insert(t);
    for (const auto& t : received_) {
      EXPECT_EQ(received_.count(t), 1u) << t << " received twice";
      EXPECT_TRUE(texts.count(t)) << t << " was never sent";
    }
    for (const auto& [id, st] : outcome_) {
      if (st.ok())
        EXPECT_EQ(received_.count(sent_[id]), 1u) << sent_[id] << " confirmed, not received";
      else
        EXPECT_EQ(st.code(), Errc::peer_unreachable) << st.toString();
    }
  }
  // Nothing lost, nothing twice, in order: every message sent was
  // confirmed, and the listener received each once, in the order sent.
  void expectLossless() {
    expectConsistent();
    EXPECT_EQ(confirmed(), sent());
    for (const auto& [id, st] : outcome_)
      EXPECT_TRUE(st.ok()) << sent_[id] << ": " << st.toString();
    EXPECT_EQ(order_.size(), sent());
    for (size_t i = 1; i < order_.size(); i++)
      EXPECT_LT(order_[i - 1], order_[i])
          << "m" << order_[i] << " received after m" << order_[i - 1];
  }

 private:
  std::optional<Client> listener_, sender_;
  size_t pad_;
  int next_ = 0;
  std::map<uint64_t, std::string> sent_;  // msgId → text
  std::map<uint64_t, Status> outcome_;
  std::map<uint64_t, std::chrono::steady_clock::time_point> when_;  // of each outcome
  std::multiset<std::string> received_;
  std::vector<int> order_;  // the numbers received, in the order received
};

}  // namespace rdmamsg::itest
