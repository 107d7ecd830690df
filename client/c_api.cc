// The C API (rdmamsg/rdmamsg.h) over rdmamsg::Client.
#include "rdmamsg/rdmamsg.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "rdmamsg/client.h"

using rdmamsg::Client;
using rdmamsg::Errc;
using rdmamsg::Status;

struct rdmamsg_client {
  explicit rdmamsg_client(Client c) : client(std::move(c)) {}
  Client client;
  std::string lastError;
  rdmamsg::Message message;   // what rdmamsg_receive handed out
  rdmamsg::MessageView view;  // what rdmamsg_receive_view handed out, until released
  std::string viewNode, viewSrcService, viewService;  // its names, NUL-terminated
  std::string viewSubject, viewReplyTo;
  rdmamsg::SendClaim claim;  // what rdmamsg_claim handed out, until committed or aborted
  rdmamsg::Completion done;  // what the last completion handed out
  std::string doneText;
};

namespace {

thread_local std::string connectError;

// Negative: without limit (ten years is as good, and cannot overflow a deadline).
std::chrono::milliseconds ms(int timeout) {
  return timeout < 0 ? std::chrono::hours(24 * 365 * 10) : std::chrono::milliseconds(timeout);
}

// Runs `f` (which returns an rdmamsg_errc); an exception (out of memory)
// becomes RDMAMSG_BUSY with its text, never crossing into C.
template <typename F>
rdmamsg_errc guarded(rdmamsg_client* c, F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    (c != nullptr ? c->lastError : connectError) = std::string("librdmamsg: ") + e.what();
    return RDMAMSG_BUSY;
  }
}

rdmamsg_errc code(const Status& st) {
  return static_cast<rdmamsg_errc>(st.code());
}

// Records a failure on `c` and returns its code.
rdmamsg_errc result(rdmamsg_client* c, const Status& st) {
  if (!st.ok()) c->lastError = st.toString();
  return code(st);
}

bool valid(const char* s) {
  return s != nullptr;
}

rdmamsg_errc badArgument(rdmamsg_client* c, const char* what) {
  return result(c, Status(Errc::bad_request, std::string(what) + " is NULL"));
}

void fill(rdmamsg_client* c, rdmamsg_message* out) {
  out->src_node = c->message.srcNode.c_str();
  out->src_service = c->message.srcService.c_str();
  out->service = c->message.service.c_str();
  out->payload = c->message.payload.data();
  out->size = c->message.payload.size();
  out->subject = c->message.subject.c_str();
  out->reply_to = c->message.replyTo.c_str();
  out->subscription = c->message.subscription;
  out->request_id = c->message.requestId;
}

// The names are copied (C wants them NUL-terminated; capacity is reused),
// the payload is not.
void fillView(rdmamsg_client* c, rdmamsg_message* out) {
  c->viewNode.assign(c->view.srcNode);
  c->viewSrcService.assign(c->view.srcService);
  c->viewService.assign(c->view.service);
  out->src_node = c->viewNode.c_str();
  out->src_service = c->viewSrcService.c_str();
  out->service = c->viewService.c_str();
  out->payload = c->view.payload.data();
  out->size = c->view.payload.size();
  c->viewSubject.assign(c->view.subject);
  c->viewReplyTo.assign(c->view.replyTo);
  out->subject = c->viewSubject.c_str();
  out->reply_to = c->viewReplyTo.c_str();
  out->subscription = c->view.subscription;
  out->request_id = c->view.requestId;
}

void fill(rdmamsg_client* c, rdmamsg_completion* out) {
  c->doneText = c->done.status.ok() ? "" : c->done.status.message();
  out->msg_id = c->done.msgId;
  out->code = code(c->done.status);
  out->message = c->doneText.c_str();
  out->matched = c->done.matched;
  out->taken = c->done.taken;
  out->dropped = c->done.dropped;
}

// Hands a queued message's id out, or records the failure.
rdmamsg_errc idOut(rdmamsg_client* c, const rdmamsg::Result<uint64_t>& r, uint64_t* id) {
  if (!r.ok()) return result(c, r.status());
  if (id != nullptr) *id = *r;
  return RDMAMSG_OK;
}

std::span<const std::byte> bytes(const void* p, size_t n) {
  return {static_cast<const std::byte*>(p), n};
}

}  // namespace

extern "C" {

rdmamsg_errc rdmamsg_connect(const char* socket_path, const char* client_name, int timeout_ms,
                             rdmamsg_client** out) {
  if (out == nullptr) {
    connectError = "rdmamsg_connect: out is NULL";
    return RDMAMSG_BAD_REQUEST;
  }
  *out = nullptr;
  return guarded(nullptr, [&] {
    rdmamsg::ConnectOptions opts;
    if (client_name != nullptr) opts.clientName = client_name;
    opts.timeout = ms(timeout_ms);
    auto r = Client::connect(socket_path != nullptr ? socket_path : "", opts);
    if (!r.ok()) {
      connectError = r.status().toString();
      return code(r.status());
    }
    connectError.clear();
    *out = new rdmamsg_client(std::move(*r));
    return RDMAMSG_OK;
  });
}

void rdmamsg_close(rdmamsg_client* c) {
  delete c;
}

const char* rdmamsg_last_error(const rdmamsg_client* c) {
  return c != nullptr ? c->lastError.c_str() : connectError.c_str();
}

const char* rdmamsg_errc_name(int code) {
  // toString returns views of string literals: NUL-terminated.
  return rdmamsg::toString(static_cast<Errc>(code)).data();
}

const char* rdmamsg_node_name(const rdmamsg_client* c) {
  return c->client.nodeName().c_str();
}

uint32_t rdmamsg_max_message_size(const rdmamsg_client* c) {
  return c->client.maxMessageSize();
}

rdmamsg_errc rdmamsg_register(rdmamsg_client* c, const char* service, int timeout_ms) {
  if (!valid(service)) return badArgument(c, "service");
  return guarded(c, [&] { return result(c, c->client.registerService(service, ms(timeout_ms))); });
}

rdmamsg_errc rdmamsg_unregister(rdmamsg_client* c, const char* service) {
  if (!valid(service)) return badArgument(c, "service");
  return guarded(c, [&] { return result(c, c->client.unregisterService(service)); });
}

rdmamsg_errc rdmamsg_send(rdmamsg_client* c, const char* node, const char* service,
                          const void* payload, size_t size, uint64_t* id) {
  if (!valid(node) || !valid(service)) return badArgument(c, "node or service");
  if (payload == nullptr && size != 0) return badArgument(c, "payload");
  return guarded(c, [&] {
    auto r = c->client.send(node, service, bytes(payload, size));
    if (!r.ok()) return result(c, r.status());
    if (id != nullptr) *id = *r;
    return RDMAMSG_OK;
  });
}

rdmamsg_errc rdmamsg_claim(rdmamsg_client* c, const char* node, const char* service, size_t size,
                           void** payload) {
  if (!valid(node) || !valid(service)) return badArgument(c, "node or service");
  if (payload == nullptr) return badArgument(c, "payload");
  return guarded(c, [&] {
    Status st = c->client.claim(c->claim, node, service, size);
    if (st.ok()) *payload = c->claim.payload.data();
    return result(c, st);
  });
}

rdmamsg_errc rdmamsg_claim_publish(rdmamsg_client* c, const char* subject, size_t size,
                                   void** payload) {
  if (!valid(subject)) return badArgument(c, "subject");
  if (payload == nullptr) return badArgument(c, "payload");
  return guarded(c, [&] {
    Status st = c->client.claimPublish(c->claim, subject, size);
    if (st.ok()) *payload = c->claim.payload.data();
    return result(c, st);
  });
}

rdmamsg_errc rdmamsg_commit(rdmamsg_client* c, uint64_t* id) {
  return guarded(c, [&] {
    auto r = c->client.commit(c->claim);
    if (!r.ok()) return result(c, r.status());
    if (id != nullptr) *id = *r;
    return RDMAMSG_OK;
  });
}

rdmamsg_errc rdmamsg_abort(rdmamsg_client* c) {
  return guarded(c, [&] { return result(c, c->client.abort(c->claim)); });
}

rdmamsg_errc rdmamsg_try_send(rdmamsg_client* c, const char* node, const char* service,
                              const void* payload, size_t size, uint64_t* id) {
  if (!valid(node) || !valid(service)) return badArgument(c, "node or service");
  if (payload == nullptr && size != 0) return badArgument(c, "payload");
  return guarded(c, [&] {
    auto r = c->client.trySend(node, service, bytes(payload, size));
    if (!r.ok()) return result(c, r.status());
    if (id != nullptr) *id = *r;
    return RDMAMSG_OK;
  });
}

rdmamsg_errc rdmamsg_flush(rdmamsg_client* c, int timeout_ms) {
  return guarded(c, [&] { return result(c, c->client.flush(ms(timeout_ms))); });
}

rdmamsg_errc rdmamsg_subscribe(rdmamsg_client* c, const char* pattern, const char* group,
                               int policy, uint32_t pending_limit, int timeout_ms, uint64_t* id) {
  if (!valid(pattern)) return badArgument(c, "pattern");
  if (policy != RDMAMSG_SLOW_DROP && policy != RDMAMSG_SLOW_BLOCK) {
    return result(c, Status(Errc::bad_request, "policy " + std::to_string(policy) +
                                                   " is neither RDMAMSG_SLOW_DROP nor _BLOCK"));
  }
  return guarded(c, [&] {
    rdmamsg::SubscribeOptions opts;
    if (group != nullptr) opts.group = group;
    opts.policy =
        policy == RDMAMSG_SLOW_BLOCK ? rdmamsg::SlowConsumer::block : rdmamsg::SlowConsumer::drop;
    opts.pendingLimit = pending_limit;
    return idOut(c, c->client.subscribe(pattern, opts, ms(timeout_ms)), id);
  });
}

rdmamsg_errc rdmamsg_unsubscribe(rdmamsg_client* c, uint64_t id) {
  return guarded(c, [&] { return result(c, c->client.unsubscribe(id)); });
}

rdmamsg_errc rdmamsg_publish(rdmamsg_client* c, const char* subject, const void* payload,
                             size_t size, uint64_t* id) {
  if (!valid(subject)) return badArgument(c, "subject");
  if (payload == nullptr && size != 0) return badArgument(c, "payload");
  return guarded(c, [&] { return idOut(c, c->client.publish(subject, bytes(payload, size)), id); });
}

rdmamsg_errc rdmamsg_request(rdmamsg_client* c, const char* subject, const void* payload,
                             size_t size, int timeout_ms, uint64_t* id) {
  if (!valid(subject)) return badArgument(c, "subject");
  if (payload == nullptr && size != 0) return badArgument(c, "payload");
  return guarded(c, [&] {
    return idOut(
        c, c->client.request(subject, bytes(payload, size), std::chrono::milliseconds(timeout_ms)),
        id);
  });
}

rdmamsg_errc rdmamsg_request_wait(rdmamsg_client* c, const char* subject, const void* payload,
                                  size_t size, rdmamsg_message* reply, int timeout_ms) {
  if (!valid(subject)) return badArgument(c, "subject");
  if (reply == nullptr) return badArgument(c, "reply");
  if (payload == nullptr && size != 0) return badArgument(c, "payload");
  return guarded(c, [&] {
    Status st = c->client.requestAndWait(subject, bytes(payload, size), c->message,
                                         std::chrono::milliseconds(timeout_ms));
    if (st.ok()) fill(c, reply);
    return result(c, st);
  });
}

rdmamsg_errc rdmamsg_reply(rdmamsg_client* c, const char* reply_to, const void* payload,
                           size_t size, uint64_t* id) {
  if (!valid(reply_to)) return badArgument(c, "reply_to");
  if (payload == nullptr && size != 0) return badArgument(c, "payload");
  return guarded(c, [&] {
    rdmamsg::Message request;
    request.replyTo = reply_to;
    return idOut(c, c->client.reply(request, bytes(payload, size)), id);
  });
}

rdmamsg_errc rdmamsg_receive(rdmamsg_client* c, rdmamsg_message* out, int timeout_ms) {
  if (out == nullptr) return badArgument(c, "out");
  return guarded(c, [&] {
    Status st = c->client.receive(c->message, ms(timeout_ms));
    if (st.ok()) fill(c, out);
    return result(c, st);
  });
}

void rdmamsg_set_confirm_on_receive(rdmamsg_client* c, int on) {
  c->client.setConfirmOnReceive(on != 0);
}

rdmamsg_errc rdmamsg_confirm_received(rdmamsg_client* c) {
  return guarded(c, [&] { return result(c, c->client.confirmReceived()); });
}

int rdmamsg_try_receive(rdmamsg_client* c, rdmamsg_message* out) {
  if (out == nullptr) return 0;
  try {
    if (!c->client.tryReceive(c->message)) return 0;
    fill(c, out);
    return 1;
  } catch (const std::exception& e) {
    c->lastError = std::string("librdmamsg: ") + e.what();
    return 0;
  }
}

rdmamsg_errc rdmamsg_receive_view(rdmamsg_client* c, rdmamsg_message* out, int timeout_ms) {
  if (out == nullptr) return badArgument(c, "out");
  return guarded(c, [&] {
    Status st = c->client.receiveView(c->view, ms(timeout_ms));
    if (st.ok()) fillView(c, out);
    return result(c, st);
  });
}

int rdmamsg_try_receive_view(rdmamsg_client* c, rdmamsg_message* out) {
  if (out == nullptr) return 0;
  try {
    if (!c->client.tryReceiveView(c->view)) return 0;
    fillView(c, out);
    return 1;
  } catch (const std::exception& e) {
    c->lastError = std::string("librdmamsg: ") + e.what();
    return 0;
  }
}

rdmamsg_errc rdmamsg_release_view(rdmamsg_client* c) {
  return guarded(c, [&] { return result(c, c->client.release(c->view)); });
}

rdmamsg_errc rdmamsg_wait_completion(rdmamsg_client* c, rdmamsg_completion* out, int timeout_ms) {
  if (out == nullptr) return badArgument(c, "out");
  return guarded(c, [&] {
    Status st = c->client.waitCompletion(c->done, ms(timeout_ms));
    if (st.ok()) fill(c, out);
    return result(c, st);
  });
}

int rdmamsg_poll_completion(rdmamsg_client* c, rdmamsg_completion* out) {
  if (out == nullptr) return 0;
  try {
    if (!c->client.pollCompletion(c->done)) return 0;
    fill(c, out);
    return 1;
  } catch (const std::exception& e) {
    c->lastError = std::string("librdmamsg: ") + e.what();
    return 0;
  }
}

size_t rdmamsg_in_flight(const rdmamsg_client* c) {
  return c->client.inFlight();
}

void rdmamsg_get_counters(const rdmamsg_client* c, rdmamsg_counters* out) {
  if (out == nullptr) return;
  const rdmamsg::ClientCounters n = c->client.counters();
  *out = {n.socketReads, n.socketWrites, n.polls, n.doorbellRings, n.doorbellReads, n.syscalls()};
}

rdmamsg_errc rdmamsg_status(rdmamsg_client* c, char** json, int timeout_ms) {
  if (json == nullptr) return badArgument(c, "json");
  *json = nullptr;
  return guarded(c, [&] {
    auto r = c->client.status(ms(timeout_ms));
    if (!r.ok()) return result(c, r.status());
    *json = static_cast<char*>(std::malloc(r->size() + 1));
    if (*json == nullptr) return result(c, Status(Errc::busy, "out of memory"));
    std::memcpy(*json, r->c_str(), r->size() + 1);
    return RDMAMSG_OK;
  });
}

void rdmamsg_free(void* p) {
  std::free(p);
}

int rdmamsg_fd(const rdmamsg_client* c) {
  return c->client.fd();
}

int rdmamsg_wants_write(const rdmamsg_client* c) {
  return c->client.wantsWrite() ? 1 : 0;
}

rdmamsg_errc rdmamsg_process_io(rdmamsg_client* c) {
  return guarded(c, [&] { return result(c, c->client.processIo()); });
}

int rdmamsg_prepare_to_poll(rdmamsg_client* c) {
  return c->client.prepareToPoll() ? 1 : 0;
}

rdmamsg_errc rdmamsg_set_idle_strategy(rdmamsg_client* c, int strategy) {
  using rdmamsg::IdleStrategy;
  switch (strategy) {
    case RDMAMSG_IDLE_SLEEP:
      c->client.setIdleStrategy(IdleStrategy::sleep);
      return RDMAMSG_OK;
    case RDMAMSG_IDLE_ADAPTIVE:
      c->client.setIdleStrategy(IdleStrategy::adaptive);
      return RDMAMSG_OK;
    case RDMAMSG_IDLE_BUSY:
      c->client.setIdleStrategy(IdleStrategy::busy);
      return RDMAMSG_OK;
    default:
      return result(c, Status(Errc::bad_request, "idle strategy " + std::to_string(strategy) +
                                                     " is not RDMAMSG_IDLE_SLEEP, _ADAPTIVE or "
                                                     "_BUSY"));
  }
}

int rdmamsg_get_idle_strategy(const rdmamsg_client* c) {
  return static_cast<int>(c->client.idleStrategy());
}

}  // extern "C"
