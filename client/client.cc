// librdmamsg: rdmamsg::Client (include/rdmamsg/client.h) — connecting, the
// handshake, and the calls that are not sending (client_send.cc,
// send_claim.cc) or viewing (receive_view.cc): registering, receiving,
// completions, status, event-loop integration, closing. Each call is a
// few lines over Client::Impl (client_impl.h) and its parts.
#include "rdmamsg/client.h"

#include <cstdlib>
#include <optional>

#include "client/client_wait.h"
#include "common/idle_strategy.h"

namespace rdmamsg {
namespace {

constexpr char kDefaultSocket[] = "/run/rdmamsg/rdmamsgd.sock";

// ConnectOptions::idleStrategy, or RDMAMSG_IDLE when set.
Result<IdleStrategy> idleStrategyFor(const ConnectOptions& opts) {
  const char* env = std::getenv("RDMAMSG_IDLE");
  if (env == nullptr || *env == '\0') return opts.idleStrategy;
  if (std::optional<IdleStrategy> s = parseIdleStrategy(env)) return *s;
  return Status(Errc::bad_request,
                "RDMAMSG_IDLE=" + std::string(env) + " is not sleep, adaptive or busy");
}

bool sharedMemoryWanted(const ConnectOptions& opts) {
  const char* env = std::getenv("RDMAMSG_SHM");
  return opts.sharedMemory && !(env != nullptr && std::string_view(env) == "0");
}

}  // namespace

// The public enum has idle::Strategy's values (common/idle_strategy.h).
const char* toString(IdleStrategy s) {
  return idle::toString(static_cast<idle::Strategy>(s));
}

std::optional<IdleStrategy> parseIdleStrategy(std::string_view text) {
  if (std::optional<idle::Strategy> s = idle::parse(text)) return static_cast<IdleStrategy>(*s);
  return std::nullopt;
}

// --- Connecting --------------------------------------------------------------------

std::string Client::defaultSocketPath() {
  const char* env = std::getenv("RDMAMSG_SOCKET");
  return (env != nullptr && *env != '\0') ? std::string(env) : std::string(kDefaultSocket);
}

Result<Client> Client::connect(std::string_view socketPath, const ConnectOptions& opts) {
  auto impl = std::make_unique<Impl>();
  Impl& im = *impl;
  const std::string path = socketPath.empty() ? defaultSocketPath() : std::string(socketPath);
  if (Status st = im.socket.connect(path, opts.timeout); !st.ok()) return st;
  Result<IdleStrategy> idle = idleStrategyFor(opts);
  if (!idle) return idle.status();
  im.idle = *idle;
  proto::encodeHello(im.out, opts.clientName);
  if (sharedMemoryWanted(opts)) im.offerSharedMemory(opts);
  Status st = im.waitFor(
      [&im] { return im.welcomed && im.link.state() != client::ShmLink::State::offered; },
      opts.timeout);
  if (!st.ok()) return st;
  return Client(std::move(impl));
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::Client(Client&&) noexcept = default;
Client& Client::operator=(Client&&) noexcept = default;
Client::~Client() {
  close();
}

void Client::close() {
  if (!impl_ || !impl_->socket.isOpen()) return;
  if (impl_->conn.ok()) {
    // What the application took counts, even if it took only part of what
    // the library had read: those messages are confirmed, the rest fail back.
    impl_->reportConsumed();
    proto::encodeBye(impl_->out);
    impl_->writeSome();  // best effort, never waits
  }
  impl_->lose(Status(Errc::not_connected, "connection closed by the client"));
}

// --- What the connection is ----------------------------------------------------------

const std::string& Client::nodeName() const {
  return impl_->nodeName;
}
uint32_t Client::maxMessageSize() const {
  return impl_->maxMessage;
}
int Client::fd() const {
  if (!impl_) return -1;
  return impl_->link.inUse() ? impl_->link.pollFd() : impl_->socket.fd();
}
bool Client::wantsWrite() const {
  return !impl_->link.inUse() && !impl_->out.empty();  // room in a ring rings the doorbell
}
IdleStrategy Client::idleStrategy() const {
  return impl_->idle;
}
void Client::setIdleStrategy(IdleStrategy s) {
  impl_->idle = s;
}
bool Client::prepareToPoll() {
  return impl_->prepareToPoll();
}
bool Client::usesSharedMemory() const {
  return impl_ && impl_->link.inUse();
}
ClientCounters Client::counters() const {
  ClientCounters c = impl_->socket.counters();
  impl_->link.addCounters(c);
  return c;
}
size_t Client::inFlight() const {
  return impl_->completions.inFlight();
}
const Status& Client::connectionStatus() const {
  return impl_->conn;
}
Status Client::processIo() {
  Impl& im = *impl_;
  if (im.conn.ok()) im.pump();
  return im.conn;
}

// --- Requests ------------------------------------------------------------------------

Status Client::registerService(std::string_view service, std::chrono::milliseconds timeout) {
  if (Status st = client::checkName("service", service); !st.ok()) return st;
  if (!impl_->conn.ok()) return impl_->conn;
  Impl& im = *impl_;
  im.requests.registering(service);
  proto::encodeRegister(im.out, service);
  Status st = im.waitFor([&im] { return im.requests.registerReply().has_value(); }, timeout);
  return st.ok() ? *im.requests.registerReply() : st;
}

Status Client::unregisterService(std::string_view service) {
  if (Status st = client::checkName("service", service); !st.ok()) return st;
  if (!impl_->conn.ok()) return impl_->conn;
  proto::encodeUnregister(impl_->out, service);
  impl_->writeSome();
  return impl_->conn;
}

Result<std::string> Client::status(std::chrono::milliseconds timeout) {
  Impl& im = *impl_;
  if (!im.conn.ok()) return im.conn;
  im.requests.askingStatus();
  proto::encodeStatusRequest(im.out);
  Status st = im.waitFor([&im] { return im.requests.statusAnswered(); }, timeout);
  if (!st.ok()) return st;
  return im.requests.takeStatusReply();
}

// --- Receiving and completions -------------------------------------------------------

bool Client::tryReceive(Message& out) {
  Impl& im = *impl_;
  if (im.view.held()) return false;  // a view is held: release it first
  if (im.inbox.empty() && im.conn.ok()) im.pump();
  if (im.inbox.empty()) return false;
  im.takeMessage(out);
  return true;
}

Status Client::receive(Message& out, std::chrono::milliseconds timeout) {
  Impl& im = *impl_;
  if (im.view.held()) return detail::viewHeldError();
  Status st = im.waitFor([&im] { return !im.inbox.empty(); }, timeout);
  if (!st.ok() && im.inbox.empty()) return st;
  im.takeMessage(out);
  return {};
}

void Client::setConfirmOnReceive(bool on) {
  impl_->inbox.setConfirmOnReceive(on);
}

Status Client::confirmReceived() {
  Impl& im = *impl_;
  im.inbox.confirmTaken();
  im.reportConsumed();
  im.writeSome();
  return im.conn;
}

bool Client::pollCompletion(Completion& out) {
  Impl& im = *impl_;
  if (im.completions.empty() && im.conn.ok()) im.pump();
  if (im.completions.empty()) return false;
  im.completions.takeFront(out);
  return true;
}

Status Client::waitCompletion(Completion& out, std::chrono::milliseconds timeout) {
  Impl& im = *impl_;
  Status st = im.waitFor([&im] { return !im.completions.empty(); }, timeout);
  if (!st.ok() && im.completions.empty()) return st;
  im.completions.takeFront(out);
  return {};
}

}  // namespace rdmamsg
