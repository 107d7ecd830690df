// The loader's top level: YAML text to Config, collecting every problem on the way.
// Order: syntax, document shape, each key on its own, then checks across keys.
#include "config/loader.h"

#include <sys/un.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include "config/local_policy_reader.h"
#include "config/mesh.h"
#include "config/yaml_fields.h"

namespace rdmamsg::config {
namespace {

using detail::FieldMap;
using detail::ProblemSink;

constexpr std::size_t kMaxSocketPath = sizeof(sockaddr_un::sun_path) - 1;

Parsed<mode_t> parseSocketMode(std::string_view text) {
  const bool digitsOk = (text.size() == 3 || (text.size() == 4 && text[0] == '0')) &&
                        text.find_first_not_of("01234567") == std::string_view::npos;
  if (!digitsOk) {
    return Parsed<mode_t>::fail("'" + std::string(text) +
                                "' is not an octal permission mode like \"0660\"");
  }
  return Parsed<mode_t>::ok(static_cast<mode_t>(std::stoul(std::string(text), nullptr, 8)));
}

Parsed<std::string> parseSocketPath(std::string_view text) {
  const std::string path(text);
  if (path.empty() || path.front() != '/') {
    return Parsed<std::string>::fail("'" + path + "' is not an absolute path");
  }
  if (path.back() == '/') return Parsed<std::string>::fail("'" + path + "' names a directory");
  if (path.size() > kMaxSocketPath) {
    return Parsed<std::string>::fail("path is " + std::to_string(path.size()) +
                                     " bytes; a Unix socket path is at most " +
                                     std::to_string(kMaxSocketPath));
  }
  return Parsed<std::string>::ok(path);
}

Parsed<std::string> parseGroup(std::string_view text) {
  if (text.empty() || text.find_first_of(" \t:/") != std::string_view::npos) {
    return Parsed<std::string>::fail("'" + std::string(text) + "' is not a group name or id");
  }
  return Parsed<std::string>::ok(std::string(text));
}

// Reads a size and checks it against [low, high]; keeps `out` (the default) when the key
// is absent or invalid.
void readSize(const FieldMap& top, std::string_view key, std::uint64_t low, std::uint64_t high,
              std::uint64_t& out) {
  const std::optional<std::uint64_t> value = top.parsed(key, parseSize);
  if (!value) return;
  if (*value < low || *value > high) {
    top.report(key,
               formatSize(*value) + " out of range " + formatSize(low) + ".." + formatSize(high));
    return;
  }
  out = *value;
}

void readCount(const FieldMap& top, std::string_view key, std::uint32_t low, std::uint32_t high,
               std::uint32_t& out) {
  const std::optional<std::string> text = top.scalar(key);
  if (!text) return;
  std::uint64_t value = 0;
  const char* end = text->data() + text->size();
  const auto [stop, ec] = std::from_chars(text->data(), end, value);
  if (stop != end || ec != std::errc()) {
    top.report(key, "'" + *text + "' is not a whole number");
  } else if (value < low || value > high) {
    top.report(key, *text + " out of range " + std::to_string(low) + ".." + std::to_string(high));
  } else {
    out = static_cast<std::uint32_t>(value);
  }
}

void readDuration(const FieldMap& top, std::string_view key, milliseconds& out) {
  const std::optional<milliseconds> value = top.parsed(key, parseDuration);
  if (!value) return;
  if (value->count() < 1 || *value > kMaxDuration) {
    top.report(key, formatDuration(*value) + " out of range 1ms.." + formatDuration(kMaxDuration));
    return;
  }
  out = *value;
}

Parsed<IdleStrategy> parseIdleStrategy(std::string_view text) {
  if (std::optional<IdleStrategy> s = idle::parse(text)) return Parsed<IdleStrategy>::ok(*s);
  return Parsed<IdleStrategy>::fail("'" + std::string(text) + "' is not sleep, adaptive or busy");
}

Parsed<RailPolicy> parseRailPolicy(std::string_view text) {
  if (text == "active-standby") return Parsed<RailPolicy>::ok(RailPolicy::kActiveStandby);
  if (text == "spread") return Parsed<RailPolicy>::ok(RailPolicy::kSpread);
  return Parsed<RailPolicy>::fail("'" + std::string(text) + "' is not active-standby or spread");
}

Parsed<ConnectMode> parseConnectMode(std::string_view text) {
  if (text == "always") return Parsed<ConnectMode>::ok(ConnectMode::kAlways);
  if (text == "on_demand") return Parsed<ConnectMode>::ok(ConnectMode::kOnDemand);
  return Parsed<ConnectMode>::fail("'" + std::string(text) + "' is not always or on_demand");
}

// idle_timeout: a duration, or 0 / off for never.
void readIdleTimeout(const FieldMap& top, Config& config) {
  const std::optional<std::string> text = top.scalar("idle_timeout");
  if (!text) return;
  if (*text == "0" || *text == "off") {
    config.timers.idleTimeout = milliseconds(0);
    return;
  }
  const auto parsed = parseDuration(*text);
  if (!parsed) {
    top.report("idle_timeout", parsed.error + "; or 0 (off) to keep idle connections");
    return;
  }
  if (*parsed.value > kMaxDuration) {
    top.report("idle_timeout", formatDuration(*parsed.value) + " out of range 1ms.." +
                                   formatDuration(kMaxDuration) + " (or 0: off)");
    return;
  }
  config.timers.idleTimeout = *parsed.value;
}

// idle_timeout closes connections made on demand: with connect: always the
// daemon would dial the peer again at once.
void checkIdleTimeout(const FieldMap& top, const Config& config) {
  if (config.timers.idleTimeout.count() == 0 || config.connect == ConnectMode::kOnDemand) return;
  if (top.reported("connect")) return;
  top.report("idle_timeout", "closing idle connections needs connect: on_demand (connect is " +
                                 std::string(top.has("connect") ? "" : "the default, ") +
                                 "always: every peer is dialed again at once)");
}

void readLocalSocket(const FieldMap& top, Config& config) {
  if (auto path = top.parsed("socket", parseSocketPath)) config.local.socket = *path;
  if (auto mode = top.parsed("socket_mode", parseSocketMode)) config.local.socketMode = *mode;
  if (!top.isNull("socket_group"))
    config.local.socketGroup = top.parsed("socket_group", parseGroup);
  if (auto on = top.parsed("shared_memory", parseBool)) config.local.sharedMemory = *on;
  if (auto s = top.parsed("idle_strategy", parseIdleStrategy)) config.idleStrategy = *s;
}

Parsed<bool> parseOnOff(std::string_view text) {
  if (text == "on") return Parsed<bool>::ok(true);
  if (text == "off") return Parsed<bool>::ok(false);
  return Parsed<bool>::fail("'" + std::string(text) + "' is not on or off");
}

void readSecrets(const FieldMap& top, Config& config) {
  if (!top.isNull("secret_file")) config.auth.secret = top.parsed("secret_file", readSecret);
  if (auto on = top.parsed("encryption", parseOnOff)) config.auth.encryption = *on;
  if (config.auth.encryption && (!top.has("secret_file") || top.isNull("secret_file")))
    top.report("encryption",
               "encryption: on needs a mesh secret (secret_file): the keys come from it");
  if (top.isNull("previous_secret_file")) return;
  config.auth.previousSecret = top.parsed("previous_secret_file", readSecret);
  if (config.auth.previousSecret && (!top.has("secret_file") || top.isNull("secret_file")))
    top.report("previous_secret_file",
               "a previous secret is only accepted next to a current one (secret_file)");
}

// tos: the ToS byte, 0..255 (the listener's and every connection's), or
// unset (absent or ~): the device's default.
void readTos(const FieldMap& top, Config& config) {
  if (top.isNull("tos")) return;
  constexpr std::uint32_t kUnset = 256;  // readCount keeps it when absent or invalid
  std::uint32_t value = kUnset;
  readCount(top, "tos", 0, 255, value);
  if (value != kUnset) config.tos = static_cast<std::uint8_t>(value);
}

Parsed<ReceiveQueue> parseReceiveQueue(std::string_view text) {
  if (text == "shared") return Parsed<ReceiveQueue>::ok(ReceiveQueue::kShared);
  if (text == "per_peer") return Parsed<ReceiveQueue>::ok(ReceiveQueue::kPerPeer);
  return Parsed<ReceiveQueue>::fail("'" + std::string(text) + "' is not shared or per_peer");
}

// The buffer pools: their sizes default to twice buffer_count, and the least
// the daemon can run with (the send pool, and one peer's receive buffers)
// must fit registered_memory_limit.
void readBuffers(const FieldMap& top, Buffers& buffers) {
  readSize(top, "buffer_size", kMinBufferSize, kMaxBufferSize, buffers.bufferSize);
  readCount(top, "buffer_count", kMinBufferCount, kMaxBufferCount, buffers.bufferCount);
  if (auto q = top.parsed("receive_queue", parseReceiveQueue)) buffers.receiveQueue = *q;
  buffers.sharedReceiveBuffers = buffers.sendBuffers = 2 * buffers.bufferCount;
  readCount(top, "shared_receive_buffers", 0, kMaxPoolBuffers, buffers.sharedReceiveBuffers);
  readCount(top, "send_buffers", 2, kMaxPoolBuffers, buffers.sendBuffers);
  readSize(top, "registered_memory_limit", kMinRegisteredMemoryLimit, kMaxRegisteredMemoryLimit,
           buffers.registeredMemoryLimit);
  for (auto key : {"buffer_size", "buffer_count", "shared_receive_buffers", "send_buffers",
                   "registered_memory_limit"})
    if (top.reported(key)) return;
  const std::uint64_t least =
      (std::uint64_t{buffers.sendBuffers} + buffers.initialGrant()) * buffers.bufferSize;
  if (least > buffers.registeredMemoryLimit)
    top.report(top.has("registered_memory_limit") ? "registered_memory_limit" : "send_buffers",
               "registered_memory_limit (" + formatSize(buffers.registeredMemoryLimit) +
                   ") cannot hold the send pool and one peer's receive buffers: (send_buffers " +
                   std::to_string(buffers.sendBuffers) + " + " +
                   std::to_string(buffers.initialGrant()) + ") x buffer_size " +
                   formatSize(buffers.bufferSize) + " = " + formatSize(least));
}

void readTuning(const FieldMap& top, Config& config) {
  readBuffers(top, config.buffers);
  readSize(top, "max_message_size", 1, kMaxMaxMessageSize, config.buffers.maxMessageSize);
  readSize(top, "send_queue_limit", kMinSendQueueLimit, kMaxSendQueueLimit,
           config.buffers.sendQueueLimit);
  readSize(top, "flow_window", kMinFlowWindow, kMaxFlowWindow, config.buffers.flowWindow);
  readSize(top, "receive_memory_limit", kMinReceiveMemoryLimit, kMaxReceiveMemoryLimit,
           config.buffers.receiveMemoryLimit);
  readCount(top, "max_subscriptions", 1, kMaxSubjectCount, config.subjects.maxSubscriptions);
  readCount(top, "pending_limit", 1, kMaxSubjectCount, config.subjects.pendingLimit);
  readCount(top, "max_peer_interest", 1, kMaxSubjectCount, config.subjects.maxPeerInterest);
  readDuration(top, "heartbeat_interval", config.timers.heartbeatInterval);
  readDuration(top, "heartbeat_timeout", config.timers.heartbeatTimeout);
  readDuration(top, "reconnect_backoff_min", config.timers.reconnectBackoffMin);
  readDuration(top, "reconnect_backoff_max", config.timers.reconnectBackoffMax);
  readDuration(top, "connect_timeout", config.timers.connectTimeout);
  readDuration(top, "message_timeout", config.timers.messageTimeout);
  readDuration(top, "rail_probe_interval", config.timers.railProbeInterval);
  if (auto mode = top.parsed("connect", parseConnectMode)) config.connect = *mode;
  readIdleTimeout(top, config);
  if (auto level = top.parsed("log_level", parseLogLevel)) config.logLevel = *level;
  if (!top.isNull("metrics_listen"))
    config.metricsListen = top.parsed("metrics_listen", parseAddress);
}

// Reports `larger` not above `smaller` (or below it, when `allowEqual`). The problem is
// placed at whichever of the two keys the file gives, the larger one if both.
void checkOrder(const FieldMap& top, std::string_view smallerKey, milliseconds smaller,
                std::string_view largerKey, milliseconds larger, bool allowEqual) {
  if (larger > smaller || (allowEqual && larger == smaller)) return;
  if (top.reported(smallerKey) || top.reported(largerKey)) return;  // a value is unknown
  const auto value = [&](std::string_view key, milliseconds v) {
    return std::string(key) + " (" + formatDuration(v) + (top.has(key) ? ")" : ", the default)");
  };
  if (top.has(largerKey)) {
    top.report(largerKey, formatDuration(larger) + " must be " +
                              (allowEqual ? "at least " : "greater than ") +
                              value(smallerKey, smaller));
  } else {
    top.report(smallerKey, formatDuration(smaller) + " must be " +
                               (allowEqual ? "at most " : "less than ") + value(largerKey, larger));
  }
}

std::optional<std::string> readNode(const FieldMap& top,
                                    const std::optional<std::string>& nodeOverride) {
  std::optional<std::string> fromFile = top.scalar("node", /*required=*/!nodeOverride);
  if (fromFile && !isValidName(*fromFile)) {
    top.report("node", "invalid node name '" + *fromFile + "' (" + std::string(kNameRule) + ")");
    fromFile.reset();
  }
  if (!nodeOverride) return fromFile;
  if (!isValidName(*nodeOverride)) {
    top.sink().addUnpositioned("--node '" + *nodeOverride + "': invalid node name (" +
                               std::string(kNameRule) + ")");
    return std::nullopt;
  }
  return nodeOverride;
}

LoadResult loadDocument(const YAML::Node& root, const std::string& file,
                        const std::optional<std::string>& nodeOverride) {
  ProblemSink sink(file);
  if (!root.IsMap()) {
    sink.add(root.Mark(), "expected a mapping of settings (node: ..., peers: ...), got " +
                              detail::describeNodeType(root));
    return LoadResult(sink.take());
  }
  const FieldMap top(root, "", kTopLevelKeys, sink);
  Config config;
  config.sourceFile = file;
  detail::SelfInput self;
  self.node = readNode(top, nodeOverride);
  self.fromOverride = nodeOverride.has_value();
  self.listenGiven = top.has("listen");
  self.listen = detail::readRails(top, "listen", /*required=*/false);
  readLocalSocket(top, config);
  readSecrets(top, config);
  readTos(top, config);
  if (auto policy = top.parsed("rail_policy", parseRailPolicy)) config.railPolicy = *policy;
  detail::readLocalPolicy(top, config.local.localPolicy);
  readTuning(top, config);
  checkOrder(top, "heartbeat_interval", config.timers.heartbeatInterval, "heartbeat_timeout",
             config.timers.heartbeatTimeout, /*allowEqual=*/false);
  checkOrder(top, "reconnect_backoff_min", config.timers.reconnectBackoffMin,
             "reconnect_backoff_max", config.timers.reconnectBackoffMax, /*allowEqual=*/true);
  checkIdleTimeout(top, config);
  detail::resolveMesh(top, self, detail::readPeers(top), config);
  if (!sink.empty()) return LoadResult(sink.take());
  return LoadResult(std::move(config));
}

// Where each YAML document of a text starts, and its root node, from yaml-cpp's
// parser events.
class DocumentMarks : public YAML::EventHandler {
 public:
  std::vector<YAML::Mark> starts, roots;

  void OnDocumentStart(const YAML::Mark& mark) override { starts.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { node(mark); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { node(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                const std::string&) override {
    node(mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    node(mark);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    node(mark);
  }
  void OnMapEnd() override {}

 private:
  void node(const YAML::Mark& mark) {
    if (roots.size() < starts.size()) roots.push_back(mark);
  }
};

// The documents of a text, at most three: more than one is refused anyway. The
// parser runs here instead of in YAML::LoadAll because yaml-cpp 0.7, at a token
// no document can start with (a ',' outside a flow collection), reports an empty
// document without consuming the token, and LoadAll then loops for ever,
// allocating (jbeder/yaml-cpp#1040). Such a document starts where the one before
// it started; the scan stops there. Throws what the parser throws.
struct DocumentScan {
  std::vector<YAML::Mark> roots;      // each document's root node
  std::optional<YAML::Mark> stuckAt;  // the token the parser cannot get past
};

DocumentScan scanDocuments(const std::string& text) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentMarks marks;
  DocumentScan scan;
  while (marks.starts.size() < 3 && parser.HandleNextDocument(marks)) {
    const std::vector<YAML::Mark>& s = marks.starts;
    if (s.size() >= 2 && s[s.size() - 1].pos == s[s.size() - 2].pos) {
      scan.stuckAt = s.back();
      break;
    }
  }
  scan.roots = std::move(marks.roots);
  return scan;
}

std::string unexpectedToken(const std::string& text, const YAML::Mark& mark) {
  const bool known = mark.pos >= 0 && static_cast<std::size_t>(mark.pos) < text.size() &&
                     text[static_cast<std::size_t>(mark.pos)] == ',';
  return known ? "YAML syntax error: unexpected ','" : "YAML syntax error: unexpected token";
}

LoadResult loadText(std::string_view yaml, const std::string& file,
                    const std::optional<std::string>& nodeOverride) {
  ProblemSink sink(file);
  const std::string text(yaml);
  DocumentScan scan;
  YAML::Node first;
  try {
    scan = scanDocuments(text);
    if (!scan.stuckAt && !scan.roots.empty()) first = YAML::Load(text);
  } catch (const YAML::DeepRecursion& e) {  // its own message is a misleading "bad file"
    sink.add(e.mark, "YAML nesting is too deep");
    return LoadResult(sink.take());
  } catch (const YAML::ParserException& e) {
    sink.add(e.mark, "YAML syntax error: " + e.msg);
    return LoadResult(sink.take());
  }
  if (scan.stuckAt) {
    sink.add(*scan.stuckAt, unexpectedToken(text, *scan.stuckAt));
    return LoadResult(sink.take());
  }
  if (scan.roots.empty() || first.IsNull()) {
    sink.addUnpositioned("the configuration is empty (it needs at least node, listen and peers)");
    return LoadResult(sink.take());
  }
  if (scan.roots.size() > 1) {
    sink.add(scan.roots[1], "only one YAML document is allowed; remove this one");
    return LoadResult(sink.take());
  }
  return loadDocument(first, file, nodeOverride);
}

}  // namespace

LoadResult loadConfigFromString(std::string_view yaml, const std::string& fileName,
                                std::optional<std::string> nodeOverride) {
  try {
    return loadText(yaml, fileName, nodeOverride);
  } catch (const std::exception& e) {
    return LoadResult(std::vector<ConfigProblem>{
        {fileName, 0, 0, std::string("internal error while loading: ") + e.what()}});
  }
}

LoadResult loadConfig(const std::string& path, std::optional<std::string> nodeOverride) try {
  const auto unreadable = [&](const std::string& why) {
    return LoadResult(
        std::vector<ConfigProblem>{{path, 0, 0, "cannot read configuration file: " + why}});
  };
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return unreadable("it is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) return unreadable(std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return unreadable(std::strerror(errno));
  return loadConfigFromString(text.str(), path, std::move(nodeOverride));
} catch (const std::exception& e) {
  return LoadResult(std::vector<ConfigProblem>{
      {path, 0, 0, std::string("internal error while loading: ") + e.what()}});
}

}  // namespace rdmamsg::config
