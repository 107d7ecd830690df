// The conformance driver for the C++ client (rdmamsg::Client): reads
// commands on stdin, one per line, and answers each on stdout as
// tests/conformance/README.md describes. The cases (conformance.py) are the
// same for every client library; this file only translates.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "rdmamsg/client.h"

namespace {

using rdmamsg::Client;
using rdmamsg::Completion;
using rdmamsg::Errc;
using rdmamsg::Message;
using rdmamsg::Status;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr auto kFillTime = std::chrono::seconds(20);
constexpr auto kFlushTime = std::chrono::seconds(10);

std::map<std::string, std::unique_ptr<Client>> clients;
// Per client: the ids it published (their completions print as pubdone),
// and the last message received with a reply token (what `reply` answers).
std::map<std::string, std::set<uint64_t>> published;
std::map<std::string, std::string> lastRequest;

void line(const std::string& s) {
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

// "~" stands for the empty string, in both directions.
std::string arg(const std::string& s) {
  return s == "~" ? std::string() : s;
}
std::string field(const std::string& s) {
  return s.empty() ? std::string("~") : s;
}
std::string oneLine(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

std::vector<std::byte> fromHex(const std::string& hex) {
  std::vector<std::byte> out;
  if (hex == "~") return out;
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<std::byte>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}
std::string toHex(std::span<const std::byte> bytes) {
  static const char* digits = "0123456789abcdef";
  if (bytes.empty()) return "~";
  std::string s;
  s.reserve(bytes.size() * 2);
  for (std::byte b : bytes) {
    s.push_back(digits[std::to_integer<unsigned>(b) >> 4]);
    s.push_back(digits[std::to_integer<unsigned>(b) & 15]);
  }
  return s;
}

std::string error(const Status& st) {
  return "error " + std::string(rdmamsg::toString(st.code())) + " " + oneLine(st.message());
}
std::string done(const std::string& name, const Completion& c) {
  std::string s = std::to_string(c.msgId) + " " + std::string(rdmamsg::toString(c.status.code()));
  if (published[name].erase(c.msgId) != 0) {
    s = "pubdone " + s + " " + std::to_string(c.matched) + " " + std::to_string(c.taken) + " " +
        std::to_string(c.dropped);
  } else {
    s = "done " + s;
  }
  if (!c.status.message().empty()) s += " " + oneLine(c.status.message());
  return s;
}
// A received message (a Message or a MessageView) as its line; one with a
// reply token is what `reply` answers next.
template <typename M>
std::string msg(const std::string& name, const M& m) {
  if (!m.replyTo.empty()) lastRequest[name] = std::string(m.replyTo);
  if (m.subscription != 0) {
    return "submsg " + std::to_string(m.subscription) + " " + field(std::string(m.srcNode)) + " " +
           field(std::string(m.subject)) + " " + field(std::string(m.replyTo)) + " " +
           toHex(m.payload);
  }
  return "msg " + field(std::string(m.srcNode)) + " " + field(std::string(m.srcService)) + " " +
         field(std::string(m.service)) + " " + toHex(m.payload);
}
// RDMAMSG_DRIVER_VIEWS=1: messages are received as views
// (Client::receiveView), each released once its line is made.
bool useViews = false;

// Receives one message into the line that says it.
Status receiveLine(const std::string& name, Client& c, milliseconds timeout, std::string& said) {
  if (!useViews) {
    Message m;
    Status st = c.receive(m, timeout);
    if (st.ok()) said = msg(name, m);
    return st;
  }
  rdmamsg::MessageView v;
  Status st = c.receiveView(v, timeout);
  if (!st.ok()) return st;
  said = msg(name, v);
  return c.release(v);
}

std::string ids(const std::vector<uint64_t>& v) {
  if (v.empty()) return "~";
  std::string s;
  for (uint64_t id : v)
    s += (s.empty() ? "" : ",") + std::to_string(id);
  return s;
}

void connect(const std::string& name, const std::vector<std::string>& a) {
  rdmamsg::ConnectOptions opts;
  opts.clientName = "conformance-" + name;
  rdmamsg::Result<Client> c = Client::connect(a.at(0), opts);
  if (!c) return line(error(c.status()));
  clients[name] = std::make_unique<Client>(std::move(c).value());
  published[name].clear();
  lastRequest.erase(name);
  const Client& cl = *clients[name];
  line("ok " + cl.nodeName() + " " + std::to_string(cl.maxMessageSize()));
}

void sendN(Client& c, const std::vector<std::string>& a) {
  const std::string node = arg(a.at(0)), service = arg(a.at(1)), prefix = arg(a.at(3));
  const long count = std::stol(a.at(2));
  std::vector<uint64_t> sent;
  for (long i = 0; i < count; ++i) {
    const std::string payload = prefix + std::to_string(i);
    rdmamsg::Result<uint64_t> id = c.send(node, service, payload);
    if (!id) {
      return line("sent " + std::to_string(sent.size()) + " " + ids(sent) + " " +
                  error(id.status()).substr(6));
    }
    sent.push_back(*id);
  }
  line("sent " + std::to_string(sent.size()) + " " + ids(sent));
}

void fill(Client& c, const std::vector<std::string>& a) {
  const std::string node = arg(a.at(0)), service = arg(a.at(1));
  const std::vector<std::byte> payload = fromHex(a.at(2));
  const long max = std::stol(a.at(3));
  const auto deadline = Clock::now() + kFillTime;
  std::vector<uint64_t> accepted;
  while (static_cast<long>(accepted.size()) < max && Clock::now() < deadline) {
    rdmamsg::Result<uint64_t> id = c.trySend(node, service, payload);
    if (!id && id.status().code() == Errc::would_block)
      return line("blocked " + std::to_string(accepted.size()) + " " + ids(accepted));
    if (!id) return line(error(id.status()));
    accepted.push_back(*id);
    if (Status st = c.processIo(); !st.ok()) return line(error(st));
  }
  line("unblocked " + std::to_string(accepted.size()) + " " + ids(accepted));
}

void take(const std::string& name, Client& c, const std::vector<std::string>& a) {
  const long max = std::stol(a.at(0));
  const milliseconds idle(std::stol(a.at(1)));
  long n = 0;
  std::string said;
  while (n < max) {
    Status st = receiveLine(name, c, idle, said);
    if (st.code() == Errc::timeout) break;
    if (!st.ok()) return line("end " + std::to_string(n) + " " + error(st).substr(6));
    line(said);
    ++n;
  }
  line("end " + std::to_string(n));
}

void completions(const std::string& name, Client& c, const std::vector<std::string>& a) {
  const long max = std::stol(a.at(0));
  const auto deadline = Clock::now() + milliseconds(std::stol(a.at(1)));
  long n = 0;
  Completion done_;
  while (n < max) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) break;
    Status st = c.waitCompletion(done_, left);
    if (st.code() == Errc::timeout) break;
    if (!st.ok()) return line("end " + std::to_string(n) + " " + error(st).substr(6));
    line(done(name, done_));
    ++n;
  }
  line("end " + std::to_string(n));
}

void subscribe(Client& c, const std::vector<std::string>& a) {
  rdmamsg::SubscribeOptions opts;
  opts.group = arg(a.at(1));
  if (a.at(2) != "drop" && a.at(2) != "block") return line("error driver policy " + a.at(2));
  opts.policy = a.at(2) == "block" ? rdmamsg::SlowConsumer::block : rdmamsg::SlowConsumer::drop;
  opts.pendingLimit = static_cast<uint32_t>(std::stoul(a.at(3)));
  rdmamsg::Result<uint64_t> id = c.subscribe(arg(a.at(0)), opts);
  line(id ? "sub " + std::to_string(*id) : error(id.status()));
}

void run(const std::string& name, const std::string& verb, const std::vector<std::string>& a) {
  if (verb == "connect") return connect(name, a);
  auto it = clients.find(name);
  if (it == clients.end()) return line("error driver no client " + name);
  Client& c = *it->second;
  if (verb == "register") {
    Status st = c.registerService(arg(a.at(0)));
    return line(st.ok() ? "ok" : error(st));
  }
  if (verb == "unregister") {
    Status st = c.unregisterService(arg(a.at(0)));
    return line(st.ok() ? "ok" : error(st));
  }
  if (verb == "send" || verb == "trysend") {
    const std::vector<std::byte> payload = fromHex(a.at(2));
    rdmamsg::Result<uint64_t> id = verb == "send" ? c.send(arg(a.at(0)), arg(a.at(1)), payload)
                                                  : c.trySend(arg(a.at(0)), arg(a.at(1)), payload);
    if (!id && id.status().code() == Errc::would_block && verb == "trysend")
      return line("would_block");
    return line(id ? "id " + std::to_string(*id) : error(id.status()));
  }
  if (verb == "sendn") return sendN(c, a);
  if (verb == "fill") return fill(c, a);
  if (verb == "flush") {
    Status st = c.flush(kFlushTime);
    return line(st.ok() ? "ok" : error(st));
  }
  if (verb == "recv") {
    std::string said;
    Status st = receiveLine(name, c, milliseconds(std::stol(a.at(0))), said);
    if (st.code() == Errc::timeout) return line("timeout");
    return line(st.ok() ? said : error(st));
  }
  if (verb == "take") return take(name, c, a);
  if (verb == "completion") {
    Completion d;
    Status st = c.waitCompletion(d, milliseconds(std::stol(a.at(0))));
    if (st.code() == Errc::timeout) return line("timeout");
    return line(st.ok() ? done(name, d) : error(st));
  }
  if (verb == "completions") return completions(name, c, a);
  if (verb == "sub") return subscribe(c, a);
  if (verb == "unsub") {
    Status st = c.unsubscribe(std::stoull(a.at(0)));
    return line(st.ok() ? "ok" : error(st));
  }
  if (verb == "pub") {
    rdmamsg::Result<uint64_t> id = c.publish(arg(a.at(0)), fromHex(a.at(1)));
    if (id) published[name].insert(*id);
    return line(id ? "id " + std::to_string(*id) : error(id.status()));
  }
  if (verb == "request") {
    Message r;
    Status st =
        c.requestAndWait(arg(a.at(0)), fromHex(a.at(1)), r, milliseconds(std::stol(a.at(2))));
    return line(st.ok() ? "reply " + field(r.srcNode) + " " + toHex(r.payload) : error(st));
  }
  if (verb == "reply") {
    auto req = lastRequest.find(name);
    if (req == lastRequest.end()) return line("error driver no message received to reply to");
    Message request;
    request.replyTo = req->second;
    rdmamsg::Result<uint64_t> id = c.reply(request, fromHex(a.at(0)));
    return line(id ? "id " + std::to_string(*id) : error(id.status()));
  }
  if (verb == "inflight") return line("inflight " + std::to_string(c.inFlight()));
  if (verb == "io") {
    Status st = c.processIo();
    return line(st.ok() ? "ok" : error(st));
  }
  if (verb == "close") {
    clients.erase(it);
    return line("ok");
  }
  line("error driver unknown command " + verb);
}

}  // namespace

int main() {
  const char* views = std::getenv("RDMAMSG_DRIVER_VIEWS");
  useViews = views != nullptr && std::string_view(views) == "1";
  std::string text;
  while (std::getline(std::cin, text)) {
    std::istringstream in(text);
    std::string name, verb, word;
    in >> name >> verb;
    std::vector<std::string> args;
    while (in >> word)
      args.push_back(word);
    try {
      run(name, verb, args);
    } catch (const std::exception& e) {  // a malformed command: the runner's mistake
      line(std::string("error driver ") + e.what());
    }
  }
  clients.clear();  // each says goodbye
  return 0;
}
