// PubSub: subjects for the router — publish/subscribe, request/reply and
// queue groups across the mesh (docs/architecture.md, "Subjects").
//
// Interest, not data, is what the daemons exchange about subscriptions:
// each tells its peers the (queue group, pattern) pairs its clients hold
// (Subscriptions), whole on every new connection, then as they change;
// each keeps what its peers said (RemoteInterest). A publish is matched
// here against both: it goes once to each host with a match (a "$pub"
// message on that peer's flow, envelope.h), and every host delivers it to
// its own subscribers — one MSG frame each — in a fan-out slot (fanout.h)
// that counts what came of it. A host's result (kPubResult) and this
// host's own slot add up to the publisher's PUB_ACK: how many
// subscriptions matched, took it, dropped it; none is no_subscribers.
//
// A queue group's message goes to one member across the mesh: a member on
// this host if there is one, else a host with a member whose flow has room
// (it picks its member: the one with the fewest pending).
//
// A subscription's slow-consumer policy: `drop` (the default) drops what
// comes past its pending limit — for it alone, counted, and said in the
// publishers' results — so a slow or stopped subscriber costs nobody
// else anything; `block` never drops: the "$pub" message is confirmed to
// the publishing daemon (its flow window) only once every block
// subscriber took it, and a publisher on this host is no longer read
// while a block subscriber it feeds is over its limit.
//
// A request is a publish with a reply token ("node/session/requestId"):
// the first reply goes straight back to the requester's daemon ("$reply")
// and client (REPLY); none matching anywhere is no_responders at once; no
// reply by its deadline is timeout; hosts lost with none left to answer
// is peer_unreachable. A reply that finds its request answered or expired
// is refused and counted.
//
// Calls go one way: the router calls in from its LocalHandler and
// PeerEvents calls; PubSub calls the local server and peers only to queue
// output.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <queue>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/byte_buffer.h"
#include "config/config.h"
#include "daemon/local/local_handler.h"
#include "daemon/loop/events.h"
#include "daemon/peer/events.h"
#include "daemon/pubsub/envelope.h"
#include "daemon/pubsub/fanout.h"
#include "daemon/pubsub/publish_table.h"
#include "daemon/pubsub/remote_interest.h"
#include "daemon/pubsub/subscriptions.h"

namespace rdmamsg::local {
class LocalServer;
}
namespace rdmamsg::peer {
class Mesh;
class Peer;
}  // namespace rdmamsg::peer

namespace rdmamsg::pubsub {

struct PubSubCounters {
  uint64_t published = 0;        // publishes accepted from clients
  uint64_t noSubscribers = 0;    // answered no_subscribers
  uint64_t fannedOut = 0;        // publishes delivered to this host's subscribers (slots)
  uint64_t delivered = 0;        // MSG frames
  uint64_t dropped = 0;          // dropped for slow consumers or subscribers gone
  uint64_t requests = 0;         // requests accepted
  uint64_t replies = 0;          // requests answered with a reply
  uint64_t noResponders = 0;     // answered no_responders
  uint64_t timeouts = 0;         // requests whose deadline passed
  uint64_t unreachable = 0;      // requests whose hosts were lost
  uint64_t lateReplies = 0;      // replies refused: answered already, or past the deadline
  uint64_t interestRefused = 0;  // peers disconnected for announcing too much
};

// Subscriptions by (pattern, queue group), for the status.
struct PatternStats {
  std::string pattern, group;
  uint64_t subscriptions = 0, pending = 0, delivered = 0, taken = 0, dropped = 0;
};

struct PubSubSnapshot {
  size_t subscriptions = 0;
  std::vector<PatternStats> patterns;  // sorted, at most kMaxPatternsShown
  bool truncated = false;
  size_t pendingPublishes = 0;
  std::vector<std::pair<std::string, size_t>> interest;  // peer name → patterns it announced
  PubSubCounters counters;
};
inline constexpr size_t kMaxPatternsShown = 1000;

class PubSub {
 public:
  // A "$pub" message to a peer is sent as session kHostSessions | the
  // peer's handle, message id its token: its outcome is PubSub's.
  static constexpr uint64_t kHostSessions = 1ULL << 63;

  PubSub(loop::EventLoop& loop, const config::Config& cfg);
  void attach(local::LocalServer* server, peer::Mesh* mesh);

  // --- clients (the router's LocalHandler) ----------------------------------
  Status subscribe(local::SessionId session, const local::SubscribeRequest& r);
  void unsubscribe(local::SessionId session, uint64_t subId);
  Status publish(local::SessionId session, const local::PublishRequest& r);
  Status respond(local::SessionId session, const local::RespondRequest& r);
  void sessionClosed(local::SessionId session);
  // A MSG came back: taken by its application (ok) or lost with its session.
  void consumed(const local::Receipt& r, Errc errc);
  // A session's deliveries fell below the low watermark.
  void sessionDrained(local::SessionId session);

  // --- peers (the router's PeerEvents) --------------------------------------
  void connectionUp(peer::Peer& from);
  void connectionLost(peer::Peer& from);
  Status interest(peer::Peer& from, peer::InterestOp op, std::string_view group,
                  std::string_view pattern);
  void pubResult(peer::Peer& from, uint64_t token, const peer::PubResultBody& result);
  // A "$pub" or "$reply" message from `from`.
  peer::Delivery incoming(peer::Peer& from, uint64_t epoch, uint64_t seq, std::string_view dst,
                          std::span<const std::byte> payload);
  // The outcome of a "$pub" message this host sent to peer `handle`: an
  // error when the host will not have it (its result is owed no more).
  void hostOutcome(uint64_t handle, uint64_t token, const Status& status);
  void queueDrained(const peer::FlowKey& flow);

  const PubSubCounters& counters() const { return counters_; }
  const Subscriptions& subscriptions() const { return subs_; }
  const RemoteInterest& remoteInterest() const { return remote_; }
  size_t pendingPublishes() const { return publishes_.size(); }
  size_t pendingDeadlines() const { return publishes_.deadlines(); }
  PubSubSnapshot snapshot() const;

 private:
  struct Publish {
    local::SessionId session = 0;
    uint64_t msgId = 0;
    bool request = false;
    bool localWaiting = false;
    uint64_t localSlot = 0;  // its fan-out to this host's subscriptions, while localWaiting
    uint32_t matched = 0, taken = 0, dropped = 0;
    std::vector<uint64_t> hosts;  // peers whose result is owed
    Status failure;               // a host that was lost or refused it
    // Ready for the next publish; `hosts` keeps its capacity.
    void reset() {
      std::vector<uint64_t> keep = std::move(hosts);
      keep.clear();
      *this = Publish{};
      hosts = std::move(keep);
    }
  };
  // A host a publish goes to, and the queue groups it is to pick a member of.
  struct Host {
    uint64_t peer = 0;
    bool plain = false;  // it has a subscription outside any group
    std::vector<std::string_view> groups;
  };

  // Matching (publish.cc).
  void matchHosts(std::string_view subject);
  void assignGroups(uint64_t cost);
  void sendToHosts(uint64_t token, Publish& p, const PubEnvelope& e,
                   std::span<const std::byte> payload);
  void finishIfDone(uint64_t token);
  void answer(uint64_t token, Publish& p, Errc errc, std::string text);
  void forget(uint64_t token);

  // Fan-out (fanout.cc).
  struct Targets;
  // local_: the plain subscriptions `subject` matches and, for each queue
  // group (every one, or those in `groups`), its member with the most room.
  void collectLocal(std::string_view subject, std::span<const std::string_view> groups,
                    bool allGroups);
  // Delivers to local_ in a new slot; true when no block subscriber is
  // left to take it (the window may be confirmed now). The slot may be
  // done (and its origin told) before this returns.
  bool fanOut(const Slot& origin, local::SessionId publisher, std::string_view srcNode,
              std::string_view subject, std::string_view replyTo,
              std::span<const std::byte> payload);
  void settle(uint64_t slotId, uint64_t subId, bool block, Errc errc);
  void slotDone(Slot& s);
  peer::Delivery incomingPub(peer::Peer& from, uint64_t epoch, uint64_t seq,
                             std::span<const std::byte> payload);

  // Requests (request.cc).
  peer::Delivery incomingReply(peer::Peer& from, uint64_t epoch, uint64_t seq,
                               std::span<const std::byte> payload);
  // The request `requestId` of `session` waits for its reply: its token.
  uint64_t* waitingRequest(local::SessionId session, uint64_t requestId);
  void armDeadline(uint64_t token, std::chrono::milliseconds after);
  void onDeadline();

  // Interest (pubsub.cc).
  void announceChanges();
  void holdPublisher(local::SessionId publisher, const peer::FlowKey& flow);

  loop::EventLoop& loop_;
  const config::Config& config_;
  local::LocalServer* server_ = nullptr;
  peer::Mesh* mesh_ = nullptr;
  Subscriptions subs_;
  RemoteInterest remote_;
  Slots slots_;
  std::vector<uint64_t> subjectPeers_;  // handles of peers whose connection routes subjects
  PublishTable<Publish> publishes_;     // by token, with their deadlines
  // Requests waiting for a reply: (session, requestId) → token.
  struct RequestKey {
    local::SessionId session;
    uint64_t id;
    friend bool operator==(const RequestKey&, const RequestKey&) = default;
  };
  struct RequestKeyHash {
    size_t operator()(const RequestKey& k) const noexcept {
      return std::hash<uint64_t>()(k.session * 0x9e3779b97f4a7c15ULL ^ k.id);
    }
  };
  std::unordered_map<RequestKey, uint64_t, RequestKeyHash> requests_;
  loop::Timer deadlineTimer_;  // armed for publishes_'s earliest deadline
  // Scratch of one publish (reused: no allocation per publish once warm).
  std::vector<Subscription*> local_;
  std::vector<Host> hosts_;
  std::vector<std::string_view> localGroups_;  // groups a local member takes
  std::vector<std::pair<std::string_view, Subscription*>> groupBest_;
  ByteBuffer envelope_;
  size_t rr_ = 0;  // rotates the choice among hosts of a queue group
  // Publishers not read until what they wait for drains.
  std::unordered_map<peer::FlowKey, std::vector<local::SessionId>, peer::FlowKeyHash> heldOnFlow_;
  std::unordered_map<local::SessionId, std::vector<local::SessionId>> heldOnSession_;
  PubSubCounters counters_;
};

}  // namespace rdmamsg::pubsub
