// librdmamsg: the C++ client library applications use to talk to their
// host's rdmamsgd over its Unix socket.
//
//   auto client = rdmamsg::Client::connect();          // $RDMAMSG_SOCKET or the default
//   client->registerService("orders");
//   uint64_t id = *client->send("nodeB", "billing", bytes);   // pipelined, no round trip
//   rdmamsg::Completion c; client->waitCompletion(c, 5s);     // ack or error for an id
//   rdmamsg::Message m; client->receive(m, 1s);               // reuses m's buffers
//   rdmamsg::MessageView v; client->receiveView(v, 1s);       // no copy: read in place,
//   use(v.payload); client->release(v);                       // confirmed at release
//
//   uint64_t sub = *client->subscribe("prices.>");            // subjects: publish/subscribe
//   client->publish("prices.eu.x", bytes);                     // Completion: matched, taken
//   rdmamsg::Message reply;                                    // request/reply
//   client->requestAndWait("quote.x", bytes, reply, 2s);       // no_responders, timeout, …
//   client->reply(request, answer);                            // a request's first reply wins
//
// Sends are buffered and written in batches (when the buffer passes a
// threshold, or on flush(), or while waiting for anything); the daemon
// answers every message with an ACK — the receiving application has taken
// it: its receive() returned it — or an ERROR naming the reason. The
// library tells its daemon what the application has taken, so that the
// senders are confirmed: when everything read is taken, and before it waits.
// A destination whose listener does not keep up is held: send() to it
// waits, trySend() returns would_block; other destinations go on. A Client is not thread-safe. For
// an application's own event loop: poll fd() for POLLIN (and POLLOUT while wantsWrite()), then call
// processIo() and drain tryReceive / pollCompletion.
//
// By default the frames go through shared memory: a ring to the daemon and
// one from it, set up over the socket at connect (ConnectOptions::
// sharedMemory, RDMAMSG_SHM=0 to turn it off). The API and its promises are
// the same either way; fd() is then an epoll descriptor that is readable
// when the daemon rings this client or closes its socket.
//
// How a blocking call waits over shared memory is the client's idle
// strategy (ConnectOptions::idleStrategy, RDMAMSG_IDLE): sleep at once on
// the doorbell (the default), spin on the rings for a bounded time first
// (adaptive), or spin until the deadline (busy, for a dedicated core).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rdmamsg/status.h"

namespace rdmamsg {

// A received message. Reuse one Message across receive() calls: its buffers
// keep their capacity, so steady-state receiving does not allocate.
// Three kinds arrive: a message sent to one of this client's services
// (`service` names it), a message published to a subject one of its
// subscriptions matched (`subscription` and `subject` name them; `replyTo`
// is set when it is a request: answer it with reply()), and the reply to
// one of its requests (`requestId` names the request).
struct Message {
  std::string srcNode;     // the sender's node
  std::string srcService;  // the sender's service ("" if it registered none, or a subject's)
  std::string service;     // the local service it was addressed to ("" for subjects)
  std::vector<std::byte> payload;
  std::string subject;        // a publish: the subject it was published to
  std::string replyTo;        // a request: its reply token ("" for anything else)
  uint64_t subscription = 0;  // a publish: the id subscribe() returned
  uint64_t requestId = 0;     // a reply: the id request() returned

  bool isRequest() const { return !replyTo.empty(); }

  std::string_view text() const {
    return {reinterpret_cast<const char*>(payload.data()), payload.size()};
  }
};

// A received message read in place (receiveView()): the names and the
// payload point into the client's own memory, nothing is copied out. It is
// valid until release(view) — or until its Client is destroyed, whichever
// comes first; a Client holds at most one view at a time. `inPlace` says
// whether the payload lies in the bytes the client read from its daemon
// (false: a private copy, for a message the library had already read into
// its queue; no difference to the caller).
struct MessageView {
  std::string_view srcNode;
  std::string_view srcService;
  std::string_view service;
  std::span<const std::byte> payload;
  std::string_view subject;   // as Message's
  std::string_view replyTo;   // as Message's: reply() takes a Message, so copy it to answer
  uint64_t subscription = 0;  // as Message's
  uint64_t requestId = 0;     // as Message's
  bool inPlace = false;
  uint64_t handle = 0;  // which view release() ends; 0 when it holds nothing

  std::string_view text() const {
    return {reinterpret_cast<const char*>(payload.data()), payload.size()};
  }
};

// A message written where it is sent from (claim()): `payload` is the
// message's bytes, to be filled by the application and then sent with
// commit() or given back with abort(). `inPlace` says whether they lie in
// the payload area shared with the daemon, which posts them to the network
// from there: no copy of the payload on this host (false: a private buffer
// that commit() sends as send() would; no difference to the caller).
struct SendClaim {
  std::span<std::byte> payload;
  bool inPlace = false;
  uint64_t handle = 0;  // which claim commit() sends; 0 when it holds nothing
};

// The system calls a client has made since it connected, by call:
// librdmamsg counts its own, as rdmamsgd counts its (`loop` in its status).
// Over shared memory a busy pair makes none per message; divide by the
// messages moved to see it.
struct ClientCounters {
  uint64_t socketReads = 0;    // recv(2) on the daemon's socket (including the EAGAIN one)
  uint64_t socketWrites = 0;   // send(2) on it
  uint64_t polls = 0;          // poll(2) of a blocking call that waits
  uint64_t doorbellRings = 0;  // write(2) to an eventfd: the daemon's doorbell, or its own
  uint64_t doorbellReads = 0;  // read(2) of its own doorbell
  uint64_t syscalls() const {
    return socketReads + socketWrites + polls + doorbellRings + doorbellReads;
  }
};

// The outcome of one sent message: ok once the receiving application has
// taken it (its receive() returned it, or it released its view), otherwise
// why it failed.
// Completions may come in any order, also for one destination.
//
// A publish's completion comes once every subscription it matched took it
// or dropped it: `matched` subscriptions (a queue group counts once),
// `taken` by their applications, `dropped` by slow consumers (policy
// drop); no_subscribers when none matched anywhere; peer_unreachable or
// timeout with the counts known so far. A request (request()) has a
// completion only when it gets no reply: no_responders at once, timeout,
// peer_unreachable — its reply, when one comes, is its outcome instead.
struct Completion {
  uint64_t msgId = 0;
  Status status;
  uint32_t matched = 0;  // a publish: subscriptions it matched
  uint32_t taken = 0;    // of those, the ones whose application took it
  uint32_t dropped = 0;  // of those, the ones that dropped it (slow consumers)
};

// What a subscription's daemon does once `pendingLimit` of its messages
// are delivered and not taken (docs/client-api.md, "Subjects").
enum class SlowConsumer : uint8_t {
  drop,   // drop what comes for this subscription alone, counted in the
          // publishers' completions: a slow subscriber stalls nobody (the default)
  block,  // lossless: its publishers are held until it takes — a slow
          // subscriber slows every publisher to its subjects
};

struct SubscribeOptions {
  // A queue group (a name, 1-63 of [A-Za-z0-9._-]; "" for none): each
  // message goes to one member of the group across the mesh.
  std::string group;
  SlowConsumer policy = SlowConsumer::drop;
  uint32_t pendingLimit = 0;  // messages delivered and not taken; 0: the daemon's pending_limit
};

// How the blocking calls (receive, waitCompletion, flush, registerService,
// a send that waits, …) wait for the daemon over shared memory, as Aeron
// names them. Whatever the strategy, the daemon is asked to ring this
// client's doorbell only while it really sleeps. Over the socket every
// strategy sleeps in poll(2).
enum class IdleStrategy : uint8_t {
  sleep,     // sleep on the doorbell at once: no CPU while idle (the default)
  adaptive,  // spin on the rings for up to kAdaptiveSpin, then sleep
  busy,      // spin on the rings until the deadline, never sleep (a dedicated core)
};
// How long `adaptive` spins before it sleeps: two doorbell wake-ups' worth
// (about 25 us each on the development machine; docs/client-api.md, "Idle
// strategies").
inline constexpr std::chrono::microseconds kAdaptiveSpin{50};
const char* toString(IdleStrategy s);
// "sleep", "adaptive" or "busy"; nullopt for anything else.
std::optional<IdleStrategy> parseIdleStrategy(std::string_view text);

struct ConnectOptions {
  std::string clientName = "librdmamsg";    // shown in the daemon's logs (<= 63 chars)
  std::chrono::milliseconds timeout{5000};  // for the HELLO/WELCOME handshake
  // Frames go through two shared-memory rings instead of the socket (no
  // system call per message) when the daemon accepts; the environment
  // variable RDMAMSG_SHM=0 turns it off for every client of a process.
  bool sharedMemory = true;
  // Bytes of the ring to the daemon and of the ring from it (powers of two,
  // 64 KiB to 64 MiB). What this client may have written before it reads a
  // HOLD grows with the first. A message of 16 KiB or more that finds no
  // room in the payload area (below) but fits half the first ring goes
  // without a copy in the daemon too (it sends the message from the ring
  // while it waits only for the link). RDMAMSG_SHM_FRAME_RECORDS=0 in the
  // environment turns both off. A larger ring costs latency to small
  // messages (it is a larger footprint in the caches: docs/performance.md).
  size_t sendRingCapacity = size_t{1} << 20;
  size_t receiveRingCapacity = size_t{4} << 20;
  // Bytes of the payload area (a power of two, 64 KiB to 256 MiB; 0: none):
  // shared memory a message of 16 KiB or more is written into, and the
  // daemon sends it from there without a copy, giving each block back when
  // it is done with it, in any order. A message waits there for its flow
  // window, too, without holding up the client's other messages. When the
  // area is full, a message goes through the send ring (above).
  // RDMAMSG_SHM_PAYLOAD_AREA=0 in the environment makes it 0. A daemon
  // older than this release (ring version 4) refuses the offer of shared
  // memory: the client then goes on over the socket.
  size_t payloadAreaCapacity = size_t{8} << 20;
  // Bytes of the delivery area (a power of two, 64 KiB to 256 MiB; 0:
  // none): shared memory the daemon writes a message of 16 KiB or more
  // into, which receiveView() then shows where it lies — no copy in this
  // process — and receive() copies out. The block is the daemon's again
  // when the view is released (or the message copied), in any order: a
  // view held for long pins only its own block, and the daemon writes
  // other messages through the receive ring meanwhile.
  // RDMAMSG_SHM_DELIVERY_AREA=0 in the environment makes it 0.
  size_t deliveryAreaCapacity = size_t{8} << 20;
  // How blocking calls wait over shared memory (IdleStrategy). The
  // environment variable RDMAMSG_IDLE=sleep|adaptive|busy replaces it for
  // every client of a process; another value of it fails connect() with
  // bad_request.
  IdleStrategy idleStrategy = IdleStrategy::sleep;
};

class Client {
 public:
  // $RDMAMSG_SOCKET if set and non-empty, else /run/rdmamsg/rdmamsgd.sock.
  static std::string defaultSocketPath();

  // Connects and performs the handshake. An empty path means defaultSocketPath().
  static Result<Client> connect(std::string_view socketPath = {}, const ConnectOptions& opts = {});

  Client(Client&&) noexcept;
  Client& operator=(Client&&) noexcept;
  ~Client();  // sends BYE (best effort) and closes

  const std::string& nodeName() const;  // the daemon's node
  uint32_t maxMessageSize() const;

  // Blocking: registers `service` on this node (duplicate_service if taken).
  Status registerService(std::string_view service,
                         std::chrono::milliseconds timeout = std::chrono::seconds(5));
  // Stops receiving for `service` (no reply; messages already queued may still arrive).
  Status unregisterService(std::string_view service);

  // Queues a message and returns its id (never 0). Does not wait for the
  // daemon; may write (or, when more than a few MiB are unwritten, wait for
  // the socket; or, when the daemon holds this destination because its
  // listener does not keep up, wait for the daemon to resume it) — it never
  // waits for acknowledgements. `fromService` names which registered service
  // sends (default: the first registered).
  Result<uint64_t> send(std::string_view node, std::string_view service,
                        std::span<const std::byte> payload, std::string_view fromService = {});
  Result<uint64_t> send(std::string_view node, std::string_view service, std::string_view text,
                        std::string_view fromService = {});
  // The same, never waiting: when the daemon holds this destination (its
  // listener does not keep up), or more than a few MiB are already
  // unwritten, the message is not queued and would_block is returned; poll
  // fd() (POLLIN, and POLLOUT while wantsWrite()), call processIo(), and try
  // again — other destinations are not held. For applications that drive
  // the client from their own event loop.
  Result<uint64_t> trySend(std::string_view node, std::string_view service,
                           std::span<const std::byte> payload, std::string_view fromService = {});
  // Zero-copy send, the counterpart of receiveView(): claim() reserves
  // `size` bytes for the payload of one message to node/service, which the
  // application writes into claim.payload; commit() sends it and returns
  // its id, as send() would (it may wait when the destination is held);
  // tryCommit() never waits (would_block leaves the claim held: commit
  // again later); abort() gives the bytes back unsent. Over shared memory a
  // claim of 16 KiB or more lies in the payload area (inPlace), when the
  // area has room; otherwise, and over the socket, in a private buffer. At
  // most one claim is held at a time (claim() again is bad_request); it
  // stays valid until commit(), abort() or the client's destruction.
  // Messages are sent in the order of send() and commit() calls, not of
  // claim() calls. A claim whose commit fails (the connection is lost) is
  // given back.
  Status claim(SendClaim& out, std::string_view node, std::string_view service, size_t size,
               std::string_view fromService = {});
  // The smallest claim that lies in the payload area; below it send() does
  // the same work with one call less.
  static constexpr size_t kMinClaimInPlace = 16 * 1024;
  Result<uint64_t> commit(SendClaim& claim);
  Result<uint64_t> tryCommit(SendClaim& claim);
  Status abort(SendClaim& claim);

  // Sends one message and waits for its completion.
  Status sendAndWait(std::string_view node, std::string_view service,
                     std::span<const std::byte> payload,
                     std::chrono::milliseconds timeout = std::chrono::seconds(30));

  // Blocking: writes everything queued (reading incoming frames meanwhile).
  Status flush(std::chrono::milliseconds timeout = std::chrono::seconds(30));

  // Waits up to `timeout` (0 = do not wait) for a message; timeout → Errc::timeout.
  // A message returned counts as taken: its sender is confirmed.
  Status receive(Message& out, std::chrono::milliseconds timeout);
  bool tryReceive(Message& out);
  // For applications that hand messages on before they count as taken (the
  // CLI writes them out first): with false, messages returned by receive()
  // count as taken only at the next confirmReceived(), which covers every
  // message returned so far. Messages never confirmed fail back to their
  // senders when the connection closes.
  void setConfirmOnReceive(bool on);
  Status confirmReceived();

  // Zero-copy receive: like receive(), but the message is viewed where the
  // library read it instead of copied into a Message. At most one view is
  // held at a time: until release(), receive(), tryReceive(), receiveView()
  // and tryReceiveView() refuse (bad_request; the try forms return false);
  // everything else goes on (sending, completions, processIo(), close()),
  // and what arrives meanwhile never moves the held view's bytes. A view
  // counts as taken — its sender is confirmed — at release(), not when it
  // is returned (with confirmOnReceive off, at the confirmReceived() after
  // the release). release() of a view not held (released already) is
  // bad_request; after close() it still ends the view (the message was not
  // taken: it failed back to its sender).
  Status receiveView(MessageView& out, std::chrono::milliseconds timeout);
  bool tryReceiveView(MessageView& out);
  Status release(MessageView& view);

  // Waits up to `timeout` for the next completion; timeout → Errc::timeout.
  Status waitCompletion(Completion& out, std::chrono::milliseconds timeout);
  bool pollCompletion(Completion& out);
  // Messages sent whose completion has not been taken by the daemon yet.
  size_t inFlight() const;

  // --- Subjects (docs/client-api.md, "Subjects") ------------------------------
  // A subject is dot-separated tokens ("prices.eu.x"); a subscription's
  // pattern may use `*` for one token and `>` (last) for the rest. At most
  // 255 bytes and 32 tokens. A bad subject, pattern, group or reply token
  // is refused here with bad_request, before anything is sent.
  //
  // Blocking: subscribes to `pattern`; the subscription's id, which each
  // message it receives names (Message::subscription). permission_denied
  // when the daemon's local_policy does not allow it; busy past
  // max_subscriptions.
  Result<uint64_t> subscribe(std::string_view pattern, const SubscribeOptions& options = {},
                             std::chrono::milliseconds timeout = std::chrono::seconds(5));
  // Gives a subscription up (no reply; messages already sent may still arrive).
  Status unsubscribe(uint64_t subscription);
  // Queues a publish to `subject`; its id, whose Completion comes once every
  // matching subscription took or dropped it. Waits as send() does (a
  // subject's subscribers with policy block hold it).
  Result<uint64_t> publish(std::string_view subject, std::span<const std::byte> payload);
  Result<uint64_t> publish(std::string_view subject, std::string_view text);
  // Zero-copy publish, as claim() is for a send: `size` bytes for the
  // payload of one publish to `subject`, written into out.payload; commit()
  // publishes it (its id, as publish()), tryCommit() never waits, abort()
  // gives it back. It lies in the payload area under claim()'s conditions;
  // the claim held is either kind, one at a time.
  Status claimPublish(SendClaim& out, std::string_view subject, size_t size);
  // Queues a request to `subject` (1 ms to 2^32 - 1 ms); its id. Its first
  // reply comes as a Message with requestId set (receive()); no reply by
  // the deadline, or nobody to answer, comes as its Completion.
  Result<uint64_t> request(std::string_view subject, std::span<const std::byte> payload,
                           std::chrono::milliseconds timeout);
  // Sends a request and waits for its reply, taken out of turn: messages
  // received before it stay queued for receive(). no_responders at once
  // when nothing subscribes to `subject`; timeout when no reply came in
  // time. Refused (bad_request) while a MessageView is held.
  Status requestAndWait(std::string_view subject, std::span<const std::byte> payload,
                        Message& reply, std::chrono::milliseconds timeout);
  // Queues the reply to `request` (a Message with a replyTo); its id, whose
  // Completion is ok once the requester took it, unknown_service when the
  // request was answered already or expired.
  Result<uint64_t> reply(const Message& request, std::span<const std::byte> payload);
  Result<uint64_t> reply(const Message& request, std::string_view text);

  // Blocking: the daemon's status as JSON text.
  Result<std::string> status(std::chrono::milliseconds timeout = std::chrono::seconds(5));

  // Event-loop integration (see the file comment).
  int fd() const;
  bool wantsWrite() const;
  // Nonblocking: writes what the socket takes, reads and parses what is there.
  // With the sleep strategy it leaves the daemon told to ring fd() for what
  // comes next; with adaptive and busy it does not (the application spins),
  // and an application that then wants to sleep in poll(fd()) calls
  // prepareToPoll() first.
  Status processIo();
  // Before polling fd() (any strategy): asks the daemon to ring this client
  // for what comes next. false when something came meanwhile: call
  // processIo() and drain instead of polling. Always true over the socket.
  bool prepareToPoll();

  // The idle strategy of the blocking calls (ConnectOptions::idleStrategy).
  IdleStrategy idleStrategy() const;
  void setIdleStrategy(IdleStrategy s);

  // The error that closed the connection, or ok while it is open.
  const Status& connectionStatus() const;
  // Whether frames go through shared memory (the daemon accepted the offer).
  bool usesSharedMemory() const;
  // The system calls made so far (ClientCounters).
  ClientCounters counters() const;
  // Tells the daemon what the application took and says goodbye (best
  // effort, never waiting), then closes: messages returned by receive() are
  // confirmed (with confirmOnReceive), those not returned fail back to their
  // senders.
  void close();

 private:
  struct Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rdmamsg
