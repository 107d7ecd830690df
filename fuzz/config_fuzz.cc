// libFuzzer target: the configuration loader (config/loader.h).
//
// The input is the text of a configuration file. loadConfigFromString must
// return a Config or problems, never throw or crash, and a problem is never
// an exception the loader caught from itself ("internal error"). A loaded
// Config must satisfy what the loader promises (valid names, values in
// range, this node not among its peers), print through settings() and
// describe() in a form that parses back to the same values, and reloading it
// over itself must change nothing. When the file names peers, it is loaded
// again as --node for its first peer, the way one mesh file serves every
// host.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <variant>

#include "config/loader.h"
#include "config/reload.h"
#include "fuzz/check.h"

namespace rdmamsg::config {
namespace {

constexpr std::string_view kFile = "fuzz.yaml";

void checkProblems(const LoadResult& result) {
  const std::vector<ConfigProblem>& problems = result.problems();
  FUZZ_CHECK(!problems.empty());
  for (size_t i = 0; i < problems.size(); ++i) {
    const ConfigProblem& p = problems[i];
    FUZZ_CHECK(p.file == kFile && p.line >= 0 && p.column >= 0 && !p.message.empty());
    FUZZ_CHECK(!p.message.starts_with("internal error while loading: "));
    FUZZ_CHECK(!p.toString().empty());
    if (i > 0) {
      const ConfigProblem& q = problems[i - 1];
      FUZZ_CHECK(std::tie(q.line, q.column) <= std::tie(p.line, p.column));
    }
  }
}

// What a Setting's value text says parses back to the Config's value.
void checkSize(std::string_view text, uint64_t value) {
  const auto parsed = parseSize(text);
  FUZZ_CHECK(parsed.value && *parsed.value == value);
}
void checkDuration(std::string_view text, milliseconds value) {
  const auto parsed = parseDuration(text);
  FUZZ_CHECK(parsed.value && *parsed.value == value);
}
void checkAddress(const Address& a) {
  const auto parsed = parseAddress(a.toString());
  FUZZ_CHECK(parsed.value && *parsed.value == a);
  sockaddr_storage storage;
  FUZZ_CHECK(a.toSockaddr(storage) != 0);
  const auto back = Address::fromSockaddr(reinterpret_cast<const sockaddr&>(storage));
  FUZZ_CHECK(back && *back == a);
}

void checkRanges(const Config& c) {
  FUZZ_CHECK(c.buffers.bufferSize >= kMinBufferSize && c.buffers.bufferSize <= kMaxBufferSize);
  FUZZ_CHECK(c.buffers.bufferCount >= kMinBufferCount && c.buffers.bufferCount <= kMaxBufferCount);
  FUZZ_CHECK(c.buffers.maxMessageSize >= 1 && c.buffers.maxMessageSize <= kMaxMaxMessageSize);
  FUZZ_CHECK(c.buffers.sendQueueLimit >= kMinSendQueueLimit &&
             c.buffers.sendQueueLimit <= kMaxSendQueueLimit);
  FUZZ_CHECK(c.buffers.flowWindow >= kMinFlowWindow && c.buffers.flowWindow <= kMaxFlowWindow);
  FUZZ_CHECK(c.buffers.receiveMemoryLimit >= kMinReceiveMemoryLimit &&
             c.buffers.receiveMemoryLimit <= kMaxReceiveMemoryLimit);
  for (milliseconds d :
       {c.timers.heartbeatInterval, c.timers.heartbeatTimeout, c.timers.reconnectBackoffMin,
        c.timers.reconnectBackoffMax, c.timers.connectTimeout, c.timers.messageTimeout}) {
    FUZZ_CHECK(d >= milliseconds(1) && d <= kMaxDuration);
  }
  FUZZ_CHECK(c.timers.heartbeatInterval < c.timers.heartbeatTimeout);
  FUZZ_CHECK(c.timers.reconnectBackoffMin <= c.timers.reconnectBackoffMax);
  FUZZ_CHECK(!c.local.socket.empty() && c.local.socket.front() == '/' &&
             c.local.socket.back() != '/');
  FUZZ_CHECK(c.local.socketMode <= 0777);
}

void checkSettings(const Config& c) {
  const std::vector<Setting> all = settings(c);
  const std::string line = describe(c);
  FUZZ_CHECK(line.ends_with("file=" + std::string(kFile)));
  // Every top-level key once, in the documented order, with "credits" after
  // buffer_count.
  size_t next = 0;
  for (const Setting& s : all) {
    FUZZ_CHECK(line.find(s.key + "=" + s.value + " ") != std::string::npos);
    if (s.key == "credits") {
      FUZZ_CHECK(s.value == std::to_string(c.buffers.grantedCredits()));
      continue;
    }
    FUZZ_CHECK(next < kTopLevelKeys.size() && s.key == kTopLevelKeys[next++]);
    if (s.key == "buffer_size") checkSize(s.value, c.buffers.bufferSize);
    if (s.key == "max_message_size") checkSize(s.value, c.buffers.maxMessageSize);
    if (s.key == "send_queue_limit") checkSize(s.value, c.buffers.sendQueueLimit);
    if (s.key == "flow_window") checkSize(s.value, c.buffers.flowWindow);
    if (s.key == "receive_memory_limit") checkSize(s.value, c.buffers.receiveMemoryLimit);
    if (s.key == "registered_memory_limit") checkSize(s.value, c.buffers.registeredMemoryLimit);
    if (s.key == "shared_receive_buffers")
      FUZZ_CHECK(s.value == std::to_string(c.buffers.sharedReceiveBuffers));
    if (s.key == "send_buffers") FUZZ_CHECK(s.value == std::to_string(c.buffers.sendBuffers));
    if (s.key == "heartbeat_interval") checkDuration(s.value, c.timers.heartbeatInterval);
    if (s.key == "heartbeat_timeout") checkDuration(s.value, c.timers.heartbeatTimeout);
    if (s.key == "reconnect_backoff_min") checkDuration(s.value, c.timers.reconnectBackoffMin);
    if (s.key == "reconnect_backoff_max") checkDuration(s.value, c.timers.reconnectBackoffMax);
    if (s.key == "connect_timeout") checkDuration(s.value, c.timers.connectTimeout);
    if (s.key == "message_timeout") checkDuration(s.value, c.timers.messageTimeout);
    if (s.key == "log_level") {
      const auto level = parseLogLevel(s.value);
      FUZZ_CHECK(level.value && *level.value == c.logLevel);
    }
  }
  FUZZ_CHECK(next == kTopLevelKeys.size());
}

void checkConfig(const Config& c, const std::optional<std::string>& nodeOverride) {
  FUZZ_CHECK(c.sourceFile == kFile && isValidName(c.node));
  if (nodeOverride) FUZZ_CHECK(c.node == *nodeOverride);
  checkAddress(c.listen);
  if (c.metricsListen) checkAddress(*c.metricsListen);
  if (c.ownAddress) checkAddress(*c.ownAddress);
  for (size_t i = 0; i < c.peers.size(); ++i) {
    const Peer& p = c.peers[i];
    FUZZ_CHECK(isValidName(p.name) && p.name != c.node && !(p.address == c.listen));
    FUZZ_CHECK(!c.ownAddress || !(p.address == *c.ownAddress));
    FUZZ_CHECK(c.findPeer(p.name) == &p);
    checkAddress(p.address);
    for (size_t j = 0; j < i; ++j)
      FUZZ_CHECK(c.peers[j].name != p.name && !(c.peers[j].address == p.address));
  }
  checkRanges(c);
  checkSettings(c);

  const auto plan = planReload(c, c);
  FUZZ_CHECK(std::holds_alternative<ReloadPlan>(plan));
  const ReloadPlan& same = std::get<ReloadPlan>(plan);
  FUZZ_CHECK(!same.changesAnything() && same.restartPending.empty());
}

void load(std::string_view yaml, const std::optional<std::string>& nodeOverride) {
  const LoadResult result = loadConfigFromString(yaml, std::string(kFile), nodeOverride);
  if (!result) return checkProblems(result);
  FUZZ_CHECK(result.problems().empty());
  checkConfig(result.config(), nodeOverride);
  if (!nodeOverride && !result.config().peers.empty())
    load(yaml, result.config().peers.front().name);
}

}  // namespace
}  // namespace rdmamsg::config

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rdmamsg::config::load(std::string_view(reinterpret_cast<const char*>(data), size), std::nullopt);
  return 0;
}
