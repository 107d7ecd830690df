// `rdmamsg bench` helpers: payload header, percentiles, stop signals, and the
// daemon status deltas (counters, per-peer RDMA work, loop, memory).
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <numeric>

#include "client/cli/bench.h"

namespace rdmamsg::cli::bench {
namespace {

// Keys of a status that are levels, not counters: their delta means nothing.
bool isGauge(const std::string& key) {
  return key == "credits" || key == "queued_bytes" || key == "in_flight" ||
         key == "uptime_seconds" || key == "rss_bytes";
}

// after - before for every numeric, non-gauge key of `after`. A counter that
// went backwards was reset (the peer reconnected): its delta is its new value.
Json numericDelta(const Json& before, const Json& after) {
  Json out = Json::object();
  if (!after.is_object()) return out;
  for (const auto& [key, value] : after.items()) {
    if (!value.is_number() || isGauge(key)) continue;
    const Json* old = before.is_object() && before.contains(key) ? &before[key] : nullptr;
    if (value.is_number_integer()) {
      const int64_t now = value.get<int64_t>();
      const int64_t was = old != nullptr && old->is_number() ? old->get<int64_t>() : 0;
      out[key] = now >= was ? now - was : now;
    } else {
      out[key] =
          value.get<double>() - (old != nullptr && old->is_number() ? old->get<double>() : 0);
    }
  }
  return out;
}

const Json* findPeer(const Json& status, const std::string& name) {
  if (!status.contains("peers") || !status["peers"].is_array()) return nullptr;
  for (const auto& p : status["peers"]) {
    if (p.value("name", std::string()) == name) return &p;
  }
  return nullptr;
}

void addInto(Json& total, const Json& delta) {
  for (const auto& [key, value] : delta.items()) {
    if (value.is_number_integer()) {
      total[key] = total.value(key, Json(0)).get<int64_t>() + value.get<int64_t>();
    } else {
      total[key] = total.value(key, Json(0)).get<double>() + value.get<double>();
    }
  }
}

Json perMessage(const Json& totals, uint64_t messages) {
  Json out = Json::object();
  for (const auto& [key, value] : totals.items()) {
    out[key] = messages == 0 ? 0.0 : value.get<double>() / static_cast<double>(messages);
  }
  return out;
}

std::string joined(const Json& obj, bool fractional) {
  std::string line;
  char buf[96];
  for (const auto& [key, value] : obj.items()) {
    if (fractional) {
      std::snprintf(buf, sizeof buf, "%s=%.3f", key.c_str(), value.get<double>());
    } else {
      std::snprintf(buf, sizeof buf, "%s=%.0f", key.c_str(), value.get<double>());
    }
    line += (line.empty() ? "" : " ") + std::string(buf);
  }
  return line.empty() ? "(none)" : line;
}

}  // namespace

void writeHeader(std::span<std::byte> payload, uint64_t seq, uint32_t sender) {
  std::memcpy(payload.data(), &seq, sizeof seq);
  std::memcpy(payload.data() + 8, &sender, sizeof sender);
  std::memcpy(payload.data() + 12, &kMagic, sizeof kMagic);
}

Header readHeader(std::span<const std::byte> payload) {
  Header h;
  uint32_t magic = 0;
  if (payload.size() < kHeaderSize) return h;
  std::memcpy(&magic, payload.data() + 12, sizeof magic);
  if (magic != kMagic) return h;
  std::memcpy(&h.seq, payload.data(), sizeof h.seq);
  std::memcpy(&h.sender, payload.data() + 8, sizeof h.sender);
  h.valid = true;
  return h;
}

std::optional<Destination> parseDestination(std::string_view text) {
  const size_t slash = text.find('/');
  if (slash == std::string_view::npos || slash == 0 || slash + 1 == text.size()) {
    return std::nullopt;
  }
  return Destination{std::string(text.substr(0, slash)), std::string(text.substr(slash + 1))};
}

double secondsBetween(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

LatencySummary summarize(std::vector<int64_t>& nanos) {
  LatencySummary s;
  if (nanos.empty()) return s;
  std::sort(nanos.begin(), nanos.end());
  const uint64_t n = nanos.size();
  // Nearest rank, in integer per-mille so that 0.99 * 100 is exactly 99.
  auto at = [&](uint64_t permille) {
    const uint64_t rank = std::clamp<uint64_t>((permille * n + 999) / 1000, 1, n);
    return static_cast<double>(nanos[rank - 1]) / 1000.0;
  };
  s.p50 = at(500);
  s.p99 = at(990);
  s.p999 = at(999);
  s.min = static_cast<double>(nanos.front()) / 1000.0;
  s.max = static_cast<double>(nanos.back()) / 1000.0;
  const double sum = std::accumulate(nanos.begin(), nanos.end(), 0.0);
  s.mean = sum / static_cast<double>(n) / 1000.0;
  return s;
}

Exit fail(std::string_view what, const Status& status) {
  std::fprintf(stderr, "rdmamsg: bench: %.*s: %s\n", static_cast<int>(what.size()), what.data(),
               status.toString().c_str());
  return status.ok() ? Exit::failure : exitFor(status);
}

Status DaemonWatch::fetch(Json& into) {
  ConnectOptions opts;
  opts.clientName = "rdmamsg-bench-status";
  Result<Client> client = Client::connect(socket_, opts);
  if (!client) return client.status();
  Result<std::string> text = client->status();
  if (!text) return text.status();
  into = Json::parse(*text, nullptr, false);
  if (into.is_discarded() || !into.is_object()) {
    return Status(Errc::protocol_error, "daemon at " + socket_ + " sent invalid status JSON");
  }
  return {};
}

Json DaemonWatch::report(uint64_t messages) const {
  Json r;
  r["socket"] = socket_;
  r["node"] = after_.value("node", std::string());
  r["counters"] = numericDelta(before_.value("counters", Json::object()),
                               after_.value("counters", Json::object()));
  Json peers = Json::object();
  Json rdmaTotal = Json::object();
  for (const auto& p : after_.value("peers", Json::array())) {
    const std::string name = p.value("name", std::string());
    const Json* old = findPeer(before_, name);
    const Json none = Json::object();
    Json e = numericDelta(old != nullptr ? *old : none, p);
    e["state"] = p.value("state", std::string());
    if (p.contains("rdma")) {
      const Json oldRdma = old != nullptr ? old->value("rdma", Json::object()) : Json::object();
      e["rdma"] = numericDelta(oldRdma, p["rdma"]);
      addInto(rdmaTotal, e["rdma"]);
    }
    peers[name] = std::move(e);
  }
  r["peers"] = std::move(peers);
  r["rdma"] = rdmaTotal;
  r["per_message"] = perMessage(rdmaTotal, messages);
  if (after_.contains("loop") && after_["loop"].is_object()) {
    r["loop"] = numericDelta(before_.value("loop", Json::object()), after_["loop"]);
    r["loop_per_message"] = perMessage(r["loop"], messages);
  }
  if (after_.contains("rss_bytes") && after_["rss_bytes"].is_number()) {
    r["rss_bytes"] = after_["rss_bytes"];
    if (before_.contains("rss_bytes")) r["rss_bytes_before"] = before_["rss_bytes"];
  }
  return r;
}

void printDaemonTable(const Json& daemons) {
  for (const std::string role : {"sender", "receiver"}) {
    if (!daemons.contains(role)) continue;
    const Json& d = daemons[role];
    std::printf("daemon %s: node %s (%s)\n", role.c_str(),
                d.value("node", std::string("?")).c_str(),
                d.value("socket", std::string("?")).c_str());
    std::printf("  rdma:        %s\n", joined(d["rdma"], false).c_str());
    std::printf("  per message: %s\n", joined(d["per_message"], true).c_str());
    std::printf("  counters:    %s\n", joined(d["counters"], false).c_str());
    if (d.contains("loop")) {
      std::printf("  loop:        %s\n", joined(d["loop"], false).c_str());
      std::printf("  loop/msg:    %s\n", joined(d["loop_per_message"], true).c_str());
    }
    if (d.contains("rss_bytes")) {
      std::printf("  rss:         %.1f MiB\n", d["rss_bytes"].get<double>() / (1024.0 * 1024.0));
    }
  }
}

ClientCounters& operator+=(ClientCounters& a, const ClientCounters& b) {
  a.socketReads += b.socketReads;
  a.socketWrites += b.socketWrites;
  a.polls += b.polls;
  a.doorbellRings += b.doorbellRings;
  a.doorbellReads += b.doorbellReads;
  return a;
}

Json clientCalls(const ClientCounters& before, const ClientCounters& after, double messages) {
  auto per = [messages](uint64_t a, uint64_t b) {
    return messages > 0 ? static_cast<double>(b - a) / messages : 0.0;
  };
  return {{"socket_reads", per(before.socketReads, after.socketReads)},
          {"socket_writes", per(before.socketWrites, after.socketWrites)},
          {"polls", per(before.polls, after.polls)},
          {"doorbell_rings", per(before.doorbellRings, after.doorbellRings)},
          {"doorbell_reads", per(before.doorbellReads, after.doorbellReads)},
          {"syscalls", per(before.syscalls(), after.syscalls())}};
}

}  // namespace rdmamsg::cli::bench
