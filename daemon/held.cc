// Messages held for listeners that do not keep up (held.h).
#include "daemon/held.h"

#include <cstring>

namespace rdmamsg {

HeldMessages::Header HeldMessages::Flow::front() const {
  Header h;
  std::memcpy(&h, data.data(), sizeof h);
  return h;
}

void HeldMessages::Flow::pop(uint64_t& totalBytes, uint64_t& totalMessages) {
  Header h = front();
  data.consume(sizeof h + h.srcLen + h.length);
  bytes -= h.cost;
  count--;
  totalBytes -= h.cost;
  totalMessages--;
}

HeldMessages::Flow* HeldMessages::find(const peer::Peer& from, std::string_view service) {
  auto it = flows_.find(std::string(service));
  if (it == flows_.end()) return nullptr;
  for (auto& f : it->second)
    if (f->from == &from) return f.get();
  return nullptr;
}

bool HeldMessages::waiting(const peer::Peer& from, std::string_view service) const {
  if (flows_.empty()) return false;
  auto it = flows_.find(std::string(service));
  if (it == flows_.end()) return false;
  for (const auto& f : it->second)
    if (f->from == &from) return f->count > 0;
  return false;
}

bool HeldMessages::hold(peer::Peer& from, uint64_t epoch, uint64_t seq, std::string_view srcService,
                        std::string_view service, std::span<const std::byte> payload,
                        uint64_t cost) {
  Flow* f = find(from, service);
  if (f == nullptr) {
    auto& v = flows_[std::string(service)];
    v.push_back(std::make_unique<Flow>(Flow{&from, epoch, {}, 0, 0}));
    f = v.back().get();
  }
  // The sender starts a message only while its unconfirmed bytes leave room
  // in the window (or it has none), and what is held here is unconfirmed.
  if (f->count > 0 && f->bytes + cost > flowWindow_) return false;
  Header h{seq, Clock::now(), cost, static_cast<uint32_t>(payload.size()),
           static_cast<uint8_t>(srcService.size())};
  f->data.append(&h, sizeof h);
  f->data.append(srcService);
  f->data.append(payload);
  f->bytes += cost;
  f->count++;
  bytes_ += cost;
  messages_++;
  return true;
}

void HeldMessages::confirmFront(Flow& f, Errc errc) {
  Header h = f.front();
  confirm_(*f.from, f.epoch, h.seq, errc);
  f.pop(bytes_, messages_);
}

void HeldMessages::drain(std::string_view service, const Deliver& deliver) {
  auto it = flows_.find(std::string(service));
  if (it == flows_.end()) return;
  bool progress = true;
  while (progress) {
    progress = false;
    for (auto& f : it->second) {
      if (f->count == 0) continue;
      Header h = f->front();
      const auto* p = reinterpret_cast<const char*>(f->data.data()) + sizeof h;
      std::string_view src(p, h.srcLen);
      std::span<const std::byte> payload(f->data.data() + sizeof h + h.srcLen, h.length);
      if (!deliver(*f->from, src, payload)) return prune(service);
      confirmFront(*f, Errc::ok);
      progress = true;
    }
  }
  prune(service);
}

void HeldMessages::fail(std::string_view service, Errc errc) {
  auto it = flows_.find(std::string(service));
  if (it == flows_.end()) return;
  for (auto& f : it->second)
    while (f->count > 0)
      confirmFront(*f, errc);
  flows_.erase(it);
}

void HeldMessages::drop(const peer::Peer& from) {
  for (auto& [service, v] : flows_)
    for (auto& f : v)
      if (f->from == &from)
        while (f->count > 0)
          f->pop(bytes_, messages_);
  compact();
}

void HeldMessages::expire(Clock::time_point now, std::chrono::milliseconds timeout) {
  for (auto& [service, v] : flows_)
    for (auto& f : v)
      while (f->count > 0 && f->front().since + timeout < now)
        confirmFront(*f, Errc::timeout);
  compact();
}

void HeldMessages::prune(std::string_view service) {
  auto it = flows_.find(std::string(service));
  if (it == flows_.end()) return;
  std::erase_if(it->second, [](const auto& f) { return f->count == 0; });
  if (it->second.empty()) flows_.erase(it);
}

void HeldMessages::compact() {
  for (auto it = flows_.begin(); it != flows_.end();) {
    std::erase_if(it->second, [](const auto& f) { return f->count == 0; });
    it = it->second.empty() ? flows_.erase(it) : std::next(it);
  }
}

size_t HeldMessages::flows() const {
  size_t n = 0;
  for (const auto& [service, v] : flows_)
    n += v.size();
  return n;
}

}  // namespace rdmamsg
