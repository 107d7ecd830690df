// rdmamsg::config::Config: the daemon's validated configuration, as plain values.
// Only the loader (loader.h) produces one; the daemon keeps it const for its lifetime.
// Default member values below ARE the documented defaults (docs/configuration.md and
// the reference file config/rdmamsgd.yaml, which a test keeps in step with them).
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/idle_strategy.h"
#include "config/address.h"
#include "config/local_policy.h"
#include "config/log_level.h"
#include "config/name.h"
#include "config/secret.h"
#include "config/units.h"

namespace rdmamsg::config {

using std::chrono::milliseconds;

// The most rails (addresses, one per NIC) a node may list in `listen` or a
// peer's `address` (docs/configuration.md, "Rails").
inline constexpr std::size_t kMaxRails = 8;

// Another daemon of the mesh (never this node itself: the loader removes it).
struct Peer {
  std::string name;  // satisfies isValidName()
  Address address;   // where its rdma_cm listens: its first rail
  // An incoming connection that names this peer must come from the host of
  // one of its rails (verify_address; off only for peers behind address
  // translation).
  bool verifyAddress = true;
  // Its further rails (`address` as a list), in order: rail i of this node
  // connects to rail i of the peer.
  std::vector<Address> extraRails{};

  std::size_t railCount() const { return 1 + extraRails.size(); }
  const Address& rail(std::size_t i) const { return i == 0 ? address : extraRails.at(i - 1); }
  std::vector<Address> rails() const;
  bool operator==(const Peer&) const = default;
};

// Accepted ranges of the tuning keys (inclusive). Durations: 1ms..kMaxDuration.
inline constexpr std::uint64_t kMinBufferSize = 1 * kKiB;
inline constexpr std::uint64_t kMaxBufferSize = 64 * kMiB;
inline constexpr std::uint32_t kMinBufferCount = 2;
inline constexpr std::uint32_t kMaxBufferCount = 16384;
inline constexpr std::uint64_t kMaxMaxMessageSize = 1 * kGiB;
inline constexpr std::uint64_t kMinSendQueueLimit = 1 * kKiB;
inline constexpr std::uint64_t kMaxSendQueueLimit = 64 * kGiB;
inline constexpr std::uint64_t kMinFlowWindow = 4 * kKiB;
inline constexpr std::uint64_t kMaxFlowWindow = 1 * kGiB;
inline constexpr std::uint64_t kMinReceiveMemoryLimit = 1 * kMiB;
inline constexpr std::uint64_t kMaxReceiveMemoryLimit = 1024 * kGiB;
inline constexpr std::uint32_t kMaxPoolBuffers = 1u << 20;
// Subjects: the most max_subscriptions, pending_limit and max_peer_interest may be.
inline constexpr std::uint32_t kMaxSubjectCount = 100'000'000;
inline constexpr std::uint64_t kMinRegisteredMemoryLimit = 1 * kMiB;
inline constexpr std::uint64_t kMaxRegisteredMemoryLimit = 1024 * kGiB;
inline constexpr milliseconds kMaxDuration = std::chrono::hours(24);
inline constexpr std::string_view kDefaultSocketPath = "/run/rdmamsg/rdmamsgd.sock";

// Where a device's receive buffers are posted (docs/scaling.md).
enum class ReceiveQueue {
  kShared,   // one shared receive queue (SRQ) per device, its buffers granted to peers on use
  kPerPeer,  // buffer_count receive buffers posted on every peer's own queue pair
};
const char* toString(ReceiveQueue q);

// When peers are dialed (`connect`): every peer at start and after every loss
// (always), or a peer at the first message a local client sends to it (on_demand).
enum class ConnectMode { kAlways, kOnDemand };
const char* toString(ConnectMode mode);

// How traffic to a peer uses the rails the two nodes share (`rail_policy`,
// docs/configuration.md, "Rails"): one connection that runs over one rail
// at a time (active-standby), or one connection per rail — a lane — with
// each flow hashed to a lane, so a flow keeps its order (spread).
enum class RailPolicy { kActiveStandby, kSpread };
const char* toString(RailPolicy policy);

// How the daemon's loop spends idle time (`idle_strategy`, docs/architecture.md):
// sleep at once, spin a while first, or spin for ever (a core of its own).
using IdleStrategy = idle::Strategy;

// The local Unix socket clients connect to, and what they may do there.
struct LocalSocket {
  std::string socket{kDefaultSocketPath};  // local Unix socket path (absolute)
  mode_t socketMode = 0660;                // permission bits of the socket
  std::optional<std::string> socketGroup;  // group owning the socket; unset: daemon's
  // Who may connect, register and send (local_policy.h); unset: anyone who can
  // open the socket may do anything.
  std::optional<LocalPolicy> localPolicy;
  // Clients may move their frames to shared-memory rings (docs/protocol.md,
  // "Shared memory"); false: every client stays on the socket.
  bool sharedMemory = true;
};

// Peer authentication (docs/security.md): the mesh secret every
// connection proves in both directions, and the one it replaces, still
// accepted while a new secret is rolled out. Unset: peers are not
// authenticated.
struct PeerAuth {
  std::optional<Secret> secret;
  std::optional<Secret> previousSecret;
  // `encryption: on`: batches between peers are encrypted (AES-256-GCM
  // under the connection's session keys); needs a secret. Off: only MACed.
  bool encryption = false;
};

// Buffers and flow control.
struct Buffers {
  std::uint64_t bufferSize = 256 * kKiB;  // bytes per receive (and send) buffer
  std::uint32_t bufferCount = 16;         // the most receive buffers one peer may fill
  // Receive buffers: one shared queue per device, or buffer_count per peer.
  ReceiveQueue receiveQueue = ReceiveQueue::kShared;
  // Shared mode: receive buffers beyond every peer's initial grant, lent to busy peers.
  std::uint32_t sharedReceiveBuffers = 32;  // the loader's default: 2 x buffer_count
  std::uint32_t sendBuffers = 32;           // per device, shared by every peer (2 x buffer_count)
  std::uint64_t registeredMemoryLimit = 1 * kGiB;  // every registered buffer, in all
  std::uint64_t maxMessageSize = 16 * kMiB;        // largest application message, bytes
  std::uint64_t sendQueueLimit = 2 * kMiB;         // bytes queued per flow before backpressure
  std::uint64_t flowWindow = 4 * kMiB;             // bytes a peer may have unconfirmed per flow
  std::uint64_t receiveMemoryLimit = 256 * kMiB;   // bytes held for congested listeners, in all

  // Send credits a peer grants when it posts `receiveBuffers` buffers: one buffer is
  // reserved for credit updates, so credits never deadlock. A sender's credits towards a
  // peer come from the peer's buffer_count (exchanged in the handshake), not its own.
  static constexpr std::uint32_t creditsFor(std::uint32_t receiveBuffers) {
    return receiveBuffers - 1;
  }
  // Credits this node grants to each peer, at most.
  std::uint32_t grantedCredits() const { return creditsFor(bufferCount); }
  // Shared receive queue: the receive buffers a peer is granted when it connects
  // (and keeps while idle): about 512 KiB of them, at least 3 (a message needs 2
  // credits, and credit returns must give back more than they spend), at most
  // buffer_count.
  std::uint32_t initialGrant() const {
    if (receiveQueue == ReceiveQueue::kPerPeer) return bufferCount;
    const std::uint64_t n = std::max<std::uint64_t>(3, 512 * kKiB / bufferSize);
    return static_cast<std::uint32_t>(std::min<std::uint64_t>(n, bufferCount));
  }
  // Send buffers one peer may hold at a time: the others keep the rest of the pool.
  std::uint32_t sendBuffersPerPeer() const {
    return std::max<std::uint32_t>(1, std::min(bufferCount, sendBuffers / 2));
  }
};

// Subjects (docs/configuration.md).
struct Subjects {
  std::uint32_t maxSubscriptions = 100000;  // per client
  std::uint32_t pendingLimit = 65536;       // messages a subscription holds not taken, at most
  std::uint32_t maxPeerInterest = 100000;   // subscription patterns a peer may announce
};

// Timers.
struct Timers {
  milliseconds heartbeatInterval{1000};     // idle time before a heartbeat is sent
  milliseconds heartbeatTimeout{5000};      // silence after which a peer is declared dead
  milliseconds reconnectBackoffMin{100};    // first reconnect delay
  milliseconds reconnectBackoffMax{10000};  // cap of the exponential backoff
  milliseconds connectTimeout{5000};        // resolve + connect + handshake deadline
  milliseconds messageTimeout{30000};       // accepted message: deliver or fail by then
  // With connect: on_demand (docs/scaling.md), a connection that carried no message
  // either way for this long is closed by agreement with the peer; 0: never.
  milliseconds idleTimeout{0};
  // With several rails: how often a rail that failed (or is not at full
  // health) is probed while the peer's connection runs over another
  // (daemon/peer/rails.h).
  milliseconds railProbeInterval{1000};
};

struct Config {
  std::string sourceFile;  // the file it was loaded from (or the name given for a string)

  // Identity and endpoints.
  std::string node;  // this daemon's name in the mesh
  Address listen;    // rdma_cm bind address: the first rail
  // Further rails (`listen` as a list, one address per NIC), in order; each
  // has its own listener, and connections over rail i leave from rail i.
  std::vector<Address> extraListen;
  // The local Unix socket: socket, socket_mode, socket_group, local_policy, shared_memory.
  LocalSocket local;
  // What the event loop does when it has nothing to do.
  IdleStrategy idleStrategy = IdleStrategy::sleep;
  std::vector<Peer> peers;  // the other daemons, in file order
  // This node's own `peers` entry, when it has one: where the others dial it
  // and where they expect its connections to come from. Connections to peers
  // leave from it when `listen` is a wildcard.
  std::optional<Address> ownAddress;
  PeerAuth auth;  // peer authentication: secret_file, previous_secret_file, encryption
  // `tos`: the ToS byte (DSCP << 2 | ECN) of every connection to a peer, set
  // with rdma_set_option(RDMA_OPTION_ID_TOS) on the listening id and on each
  // dialed id before its address is resolved. Unset: the device's default.
  std::optional<std::uint8_t> tos;
  RailPolicy railPolicy = RailPolicy::kActiveStandby;

  Buffers buffers;    // buffers and flow control
  Subjects subjects;  // subscription limits
  Timers timers;      // heartbeats, reconnects, deadlines, idle_timeout

  // Connections on demand (docs/scaling.md); see also timers.idleTimeout.
  ConnectMode connect = ConnectMode::kAlways;

  LogLevel logLevel = LogLevel::kInfo;
  // HTTP listener serving GET /metrics (OpenMetrics); unset: none.
  std::optional<Address> metricsListen;

  // The peer named `name`, or nullptr.
  const Peer* findPeer(std::string_view name) const;
  // This node's rails: `listen` and its further entries.
  std::size_t railCount() const { return 1 + extraListen.size(); }
  const Address& listenRail(std::size_t i) const { return i == 0 ? listen : extraListen.at(i - 1); }
  std::vector<Address> listenRails() const;
  // The rails this node shares with `peer`: its rail i pairs with the peer's
  // rail i, as many as the shorter list has.
  std::size_t railsWith(const Peer& peer) const { return std::min(railCount(), peer.railCount()); }
  // The connections (lanes) this node keeps with `peer`: one per shared rail
  // with spread, else one; and with every peer.
  std::size_t lanesWith(const Peer& peer) const {
    return railPolicy == RailPolicy::kSpread ? railsWith(peer) : 1;
  }
  std::size_t laneCount() const;
};

// "10.0.0.1:7471" for one rail, "[10.0.0.1:7471, 10.0.1.1:7471]" for several.
std::string toString(const std::vector<Address>& rails);

// Every setting as (key, value text), in the file's key names and order
// ("credits" is derived from buffer_count).
struct Setting {
  std::string key, value;
};
std::vector<Setting> settings(const Config& config);

// One line for the startup log: every setting as key=value, and the file.
std::string describe(const Config& config);

}  // namespace rdmamsg::config
