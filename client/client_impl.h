// Client::Impl: librdmamsg's private state behind rdmamsg::Client — the
// owner of the client's parts, each a class of its own:
//
//   socket       SocketTransport    the Unix socket to rdmamsgd
//   link         ShmLink            the shared-memory link (rings, areas, doorbells)
//   completions  Completions        outcomes of sent messages not taken yet
//   inbox        ReceiveQueue       messages read and not taken, and the taken count
//   claim        ClaimSlot          the message claim() holds (zero-copy send)
//   view         ViewSlot           the message receiveView() holds (zero-copy receive)
//   held         HeldDestinations   destinations the daemon holds
//   requests     Requests           the blocking requests' answers
//   sendCheck    SendCheck          names and size checked before a message is queued
//   subs         Subscriptions      subscriptions: their ids, the SUBs awaiting an answer
//
// Impl owns the frame streams (`in`, `out`), decodes what it reads and
// hands each frame to the part it concerns, and decides what a failure
// means (lose()). Calls go one way: Impl calls its parts; the parts return
// outcomes and never call Impl. Its functions live in client_io.cc
// (moving bytes and records, waking and sleeping), client_frames.cc (the
// frames read), client_send.cc (queueing a message), send_claim.cc,
// receive_view.cc, client_subjects.cc (subjects) and client_wait.h (how a blocking call waits).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "client/claim_slot.h"
#include "client/completions.h"
#include "client/held_destinations.h"
#include "client/receive_queue.h"
#include "client/requests.h"
#include "client/send_check.h"
#include "client/shm_link.h"
#include "client/socket_transport.h"
#include "client/subscriptions.h"
#include "client/view_slot.h"
#include "common/byte_buffer.h"
#include "common/local_protocol.h"
#include "rdmamsg/client.h"

namespace rdmamsg {
namespace detail {

inline constexpr size_t kReadChunk = 256 * 1024;

// What receiving says while a view is held.
inline Status viewHeldError() {
  return Status(Errc::bad_request, "a MessageView is held: release() it before receiving again");
}

}  // namespace detail

struct Client::Impl {
  using Clock = std::chrono::steady_clock;
  using Block = client::ShmLink::Block;

  client::SocketTransport socket;
  client::ShmLink link;
  client::Completions completions;
  client::ReceiveQueue inbox;
  client::ClaimSlot claim;
  client::ViewSlot view;
  client::HeldDestinations held;
  client::Requests requests;
  client::SendCheck sendCheck;
  client::Subscriptions subs;
  // Frames read (from the socket, or copied out of the ring) and not parsed
  // yet, and frames queued to write. With shared memory the socket carries
  // no frames but a closing ERROR, read into sockIn.
  ByteBuffer in{detail::kReadChunk};
  ByteBuffer out{detail::kReadChunk};
  ByteBuffer sockIn{4096};
  Status conn;  // ok while connected
  // What WELCOME said.
  bool welcomed = false;
  std::string nodeName;
  uint32_t maxMessage = 0;
  uint32_t maxBody = proto::kDefaultMaxBody;
  uint64_t nextId = 1;      // of the next message sent
  uint64_t lastHandle = 0;  // of the last claim or view handed out
  IdleStrategy idle = IdleStrategy::sleep;
  Clock::time_point nextSocketLook{};  // spinning: when to look at the socket next
  bool outBlocked = false;             // trySend said would_block for a full buffer

  // The connection is lost (the first reason stays): the socket and fd() close.
  void lose(Status why);

  // --- Moving bytes and records (client_io.cc) -------------------------------
  // Write and read what they can without waiting; a failure is `conn`.
  void writeSome();
  void readSome();
  void readSocket(ByteBuffer& into);  // whatever the socket has (its end: lose)
  void writeRing();
  void readRing();
  // A DELIVER the daemon placed in the delivery area, next in the ring: held
  // for the view receiveView() waits for (view.ready()), or copied into the
  // inbox and given back at once. True when it was taken and reading goes
  // on; false when it waits (a view is ready) or the connection was lost.
  bool takeDeliveryBlock();
  // Everything queued is written: into the socket, or into the ring while
  // the daemon's socket is open (a ring does not fail when its reader died).
  bool allWritten();
  // What processIo() does: consumption reported, written, read.
  void pump();
  void pumpRings();
  void settleRings();
  // settleRings() where the strategy sleeps; spinning ones leave the daemon
  // unasked to ring (the application calls prepareToPoll() before it polls).
  void settleIfSleeping();
  bool prepareToPoll();
  // Spinning: reads the socket once every kSocketLook (a closing ERROR, its end).
  void lookAtSocketNowAndThen(Clock::time_point now);
  void sleepOnRing(int ms);
  void offerSharedMemory(const ConnectOptions& opts);
  void startSharedMemory();

  // --- The frames read (client_frames.cc) ------------------------------------
  void parseInput(ByteBuffer& from);
  void handleFrame(const proto::Frame& f);
  void handleWelcome(const proto::Frame& f);
  void handleError(const proto::Frame& f);
  void handleShmAccept();
  void handleSubscribed(uint64_t subId);
  void handlePubAck(const proto::Frame& f);
  void handleReply(const proto::Frame& f);
  // Tells the daemon what the application has taken (CONSUMED), if more.
  void reportConsumed();
  // Hands the oldest queued message to `m` (receive(), tryReceive()).
  void takeMessage(Message& m);
  // After a message was taken: with confirmOnReceive and nothing more
  // read, tells the daemon at once.
  void afterTaken();
  // Whether everything read is taken: nothing queued, no complete frame in `in`.
  bool allReadTaken() const;

  // --- Sending (client_send.cc, send_claim.cc) -------------------------------
  // Queues a SEND; with `mayWait`, waits for the socket when more than
  // kWriteBlockLimit is unwritten (send()), else returns would_block first
  // (trySend()). `claimed`: the claim's block, which the payload lies in.
  Result<uint64_t> queueSend(std::string_view node, std::string_view service,
                             std::span<const std::byte> payload, std::string_view fromService,
                             bool mayWait, const Block* claimed = nullptr);
  Status checkRoom(bool mayWait);
  Status checkHeld(std::string_view node, std::string_view service, bool mayWait);
  Result<uint64_t> sent(uint64_t id);
  Result<uint64_t> queued(uint64_t id, bool mayWait);
  Result<uint64_t> commitClaim(SendClaim& c, bool mayWait);

  // --- Subjects (client_subjects.cc) ----------------------------------------
  // Queues a PUB (timeoutMs 0: a publish; else a request) as send() queues
  // a SEND, in place when large or `claimed` (claimPublish()); `awaitReply`:
  // requestAndWait() keeps the reply aside.
  // A subject and payload size the daemon would take (bad_request, too_large).
  Status checkPublish(std::string_view subject, size_t size) const;
  Result<uint64_t> queuePub(std::string_view subject, uint32_t timeoutMs,
                            std::span<const std::byte> payload, bool awaitReply,
                            bool mayWait = true, const Block* claimed = nullptr);

  // --- Views (receive_view.cc) -----------------------------------------------
  bool viewAvailable() const { return view.ready() || !inbox.empty(); }
  void prepareView();
  Status waitForView(std::chrono::milliseconds timeout);  // waitFor(viewAvailable)
  void takeView(MessageView& v);

  // --- Waiting (client_wait.h) -----------------------------------------------
  template <typename Done>
  Status waitFor(Done done, std::chrono::milliseconds timeout);
  template <typename Done>
  Status waitUntil(Done done, std::chrono::milliseconds timeout);
  template <typename Done>
  bool spinOnRings(Done& done, Clock::time_point deadline);
};

}  // namespace rdmamsg
