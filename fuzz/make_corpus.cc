// make_corpus: writes the fuzz targets' seed corpus (fuzz/corpus/<target>/),
// real inputs made by the project's own encoders: local protocol frames and
// sessions, peer batches and handshakes, configuration files, and
// shared-memory ring images written by the ring's producer.
//
//   build/fuzz/fuzz/make_corpus fuzz/corpus config/rdmamsgd.yaml
//
// The output is deterministic; the corpus in the repository is what this
// writes, so that a change to a format shows up as a change to the seeds.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iostream>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "common/local_protocol.h"
#include "common/shm_payload_area.h"
#include "common/shm_ring.h"
#include "daemon/peer/batch_auth.h"
#include "daemon/peer/protocol.h"
#include "daemon/pubsub/envelope.h"

namespace rdmamsg {
namespace {

namespace fs = std::filesystem;
using Bytes = std::span<const std::byte>;

Bytes bytesOf(std::string_view s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

void writeFile(const fs::path& path, Bytes data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

// --- local protocol ----------------------------------------------------------

void localFrames(const fs::path& dir) {
  using namespace proto;
  const auto one = [&](const char* name, auto encode) {
    ByteBuffer b;
    encode(b);
    writeFile(dir / name, b.readable());
  };
  const AckRange acks[] = {{1, 3}, {7, 1}, {UINT64_MAX, 1}};
  one("hello", [](ByteBuffer& b) { encodeHello(b, "orders-client"); });
  one("welcome", [](ByteBuffer& b) { encodeWelcome(b, 16u << 20, "alpha"); });
  one("register", [](ByteBuffer& b) { encodeRegister(b, "orders"); });
  one("registered", [](ByteBuffer& b) { encodeRegistered(b, "orders"); });
  one("unregister", [](ByteBuffer& b) { encodeUnregister(b, "orders"); });
  one("send", [](ByteBuffer& b) { encodeSend(b, 1, "beta", "inbox", "orders", bytesOf("hello")); });
  one("send_anonymous", [](ByteBuffer& b) { encodeSend(b, 42, "beta", "inbox", "", {}); });
  one("deliver",
      [](ByteBuffer& b) { encodeDeliver(b, "alpha", "orders", "inbox", bytesOf("hello")); });
  one("ack", [&](ByteBuffer& b) { encodeAck(b, acks); });
  one("error", [](ByteBuffer& b) {
    encodeError(b, 7, Errc::unknown_service, static_cast<uint8_t>(FrameKind::send),
                "no service 'inbox' on beta");
  });
  one("error_connection", [](ByteBuffer& b) {
    encodeError(b, 0, Errc::protocol_error, 0, "the first frame must be HELLO");
  });
  one("status_request", [](ByteBuffer& b) { encodeStatusRequest(b); });
  one("status_reply", [](ByteBuffer& b) {
    encodeStatusReply(b, R"({"node":"alpha","peers":[],"services":["orders"]})");
  });
  one("bye", [](ByteBuffer& b) { encodeBye(b); });
  one("consumed", [](ByteBuffer& b) { encodeConsumed(b, 4096); });
  one("hold", [](ByteBuffer& b) { encodeHold(b, "nodeB", "inbox"); });
  one("resume", [](ByteBuffer& b) { encodeResume(b, "nodeB", "inbox"); });
  one("sub", [](ByteBuffer& b) { encodeSub(b, 1, "orders.*.eu", "", SlowConsumer::drop, 0); });
  one("sub_group",
      [](ByteBuffer& b) { encodeSub(b, 2, "work.>", "workers", SlowConsumer::block, 64); });
  one("subscribed", [](ByteBuffer& b) { encodeSubscribed(b, 1); });
  one("unsub", [](ByteBuffer& b) { encodeUnsub(b, 1); });
  one("pub", [](ByteBuffer& b) { encodePub(b, 3, 0, "orders.x.eu", bytesOf("an order")); });
  one("request", [](ByteBuffer& b) { encodePub(b, 4, 5000, "svc.echo", bytesOf("ping")); });
  one("pub_ack", [](ByteBuffer& b) { encodePubAck(b, 3, {Errc::ok, 3, 2, 1}, ""); });
  one("pub_ack_nobody",
      [](ByteBuffer& b) { encodePubAck(b, 5, {Errc::no_subscribers}, "no subscription matches"); });
  one("msg",
      [](ByteBuffer& b) { encodeMsg(b, 1, "beta", "orders.x.eu", "", bytesOf("an order")); });
  one("msg_request",
      [](ByteBuffer& b) { encodeMsg(b, 1, "alpha", "svc.echo", "alpha/3/4", bytesOf("ping")); });
  one("respond", [](ByteBuffer& b) { encodeRespond(b, 9, "alpha/3/4", bytesOf("pong")); });
  one("reply", [](ByteBuffer& b) { encodeReply(b, 4, "beta", bytesOf("pong")); });
  // What each side reads from its socket in a short session.
  one("client_session", [](ByteBuffer& b) {
    encodeHello(b, "cli");
    encodeRegister(b, "orders");
    encodeSend(b, 1, "beta", "inbox", "orders", bytesOf("one"));
    encodeSend(b, 2, "beta", "inbox", "", bytesOf("two"));
    encodeUnregister(b, "orders");
    encodeStatusRequest(b);
    encodeBye(b);
  });
  one("daemon_session", [&](ByteBuffer& b) {
    encodeWelcome(b, 4096, "alpha");
    encodeRegistered(b, "orders");
    encodeDeliver(b, "beta", "", "orders", bytesOf("payload"));
    encodeAck(b, std::span(acks, 1));
    encodeError(b, 3, Errc::timeout, static_cast<uint8_t>(FrameKind::send), "timed out");
    encodeStatusReply(b, "{}");
    encodeBye(b);
  });
}

// --- peer protocol -------------------------------------------------------------

void peerBatches(const fs::path& dir) {
  using namespace peer;
  const auto one = [&](const char* name, uint32_t credits, auto add) {
    std::vector<std::byte> buffer(4096);
    BatchWriter w;
    w.reset(buffer.data(), buffer.size());
    add(w);
    writeFile(dir / name, Bytes(buffer.data(), w.finish(credits)));
  };
  one("message", 0, [](BatchWriter& w) {
    w.addMessage(1, kFirstFragment | kLastFragment, "orders", "inbox", 0, bytesOf("hello"));
  });
  one("first_fragment", 0, [](BatchWriter& w) {
    w.addMessage(2, kFirstFragment, "orders", "inbox", 100, bytesOf("the first part"));
  });
  one("middle_fragment", 0,
      [](BatchWriter& w) { w.addMessage(2, 0, "orders", "inbox", 0, bytesOf("the middle part")); });
  one("last_fragment", 0, [](BatchWriter& w) {
    w.addMessage(2, kLastFragment, "orders", "inbox", 0, bytesOf("the last part"));
  });
  one("confirm", 4, [](BatchWriter& w) { w.addConfirm(1, 9, 0); });
  one("heartbeat", 0, [](BatchWriter& w) { w.addHeartbeat(); });
  one("credits", 12, [](BatchWriter&) {});
  one("auth", 0, [](BatchWriter& w) {
    AuthBody a{};
    a.proofCount = 2;
    for (size_t i = 0; i < kNonceSize; i++)
      a.nonce[i] = static_cast<uint8_t>(i * 7);
    a.proofs[0][0] = 0x5a;
    a.proofs[1][31] = 0xa5;
    w.addAuth(a);
  });
  one("interest", 0, [](BatchWriter& w) {
    w.addInterest(InterestOp::kAdd, "", "orders.*.eu");
    w.addInterest(InterestOp::kAdd, "workers", "work.>");
    w.addInterest(InterestOp::kRemove, "", "orders.*.eu");
  });
  one("pub_result", 0, [](BatchWriter& w) { w.addPubResult(42, {3, 2, 1, 0}); });
  one("resume", 0, [](BatchWriter& w) {
    w.addResume(ResumeKind::kContinue, 41, 17);
    w.addResume(ResumeKind::kProgress, 50, 45);
  });
  one("mixed", 3, [](BatchWriter& w) {
    w.addMessage(5, kFirstFragment | kLastFragment, "", "inbox", 0, bytesOf("a"));
    w.addConfirm(10, 12, 2);
    w.addMessage(6, kFirstFragment | kLastFragment, "orders", "billing", 0, {});
    w.addConfirm(13, 13, 4);
    w.addHeartbeat();
  });
}

void peerHellos(const fs::path& dir) {
  using namespace peer;
  Hello h;
  h.nodeId = nodeId("alpha");
  h.targetId = nodeId("beta");
  h.incarnation = 0x0123456789abcdefULL;
  h.bufferSize = 256 * 1024;
  h.bufferCount = 16;
  h.maxMessage = 16 << 20;
  h.flowWindow = 4 << 20;
  // As rdma_cm delivers them: zero-padded to 56 (connect), 196 (accept), 148 (reject).
  const auto one = [&](const char* name, const Hello& hello, size_t padded) {
    std::vector<std::byte> data(padded);
    std::memcpy(data.data(), &hello, sizeof hello);
    writeFile(dir / name, data);
  };
  one("connect", h, 56);
  one("accept", h, 196);
  Hello authenticating = h;
  authenticating.flags = kHelloAuthenticates | kHelloBatchMac;
  one("connect_authenticating", authenticating, 56);
  AcceptData accept{};
  accept.hello = authenticating;
  for (size_t i = 0; i < kNonceSize; i++)
    accept.nonce[i] = static_cast<uint8_t>(255 - i);
  std::vector<std::byte> data(196);
  std::memcpy(data.data(), &accept, sizeof accept);
  writeFile(dir / "accept_authenticating", data);
  Hello reject{};
  reject.reason = RejectReason::kDuplicate;
  one("reject_duplicate", reject, 148);
  Hello old{};
  old.version = 1;
  one("version_1", old, 56);
}

// --- configuration -------------------------------------------------------------

void configs(const fs::path& dir, const fs::path& reference) {
  fs::copy_file(reference, dir / "reference.yaml", fs::copy_options::overwrite_existing);
  const auto one = [&](const char* name, std::string_view yaml) {
    writeFile(dir / name, bytesOf(yaml));
  };
  one("minimal.yaml",
      "node: alpha\n"
      "listen: 10.0.0.1:7471\n"
      "peers: []\n");
  one("mesh.yaml",  // one file for every host: --node picks the entry
      "peers:\n"
      "  - {name: alpha, address: 10.0.0.1:7471}\n"
      "  - {name: beta, address: 10.0.0.2:7471}\n"
      "  - {name: gamma, address: '[fd00::3]:7471', verify_address: false}\n");
  one("every_key.yaml",
      "node: beta\n"
      "listen: '[::1]:7472'\n"
      "socket: /tmp/rdmamsg/beta.sock\n"
      "socket_mode: '0600'\n"
      "socket_group: rdmamsg\n"
      "peers:\n"
      "  - name: alpha\n"
      "    address: 127.0.0.1:7471\n"
      "    verify_address: False\n"
      "buffer_size: 64 KiB\n"
      "buffer_count: 32\n"
      "receive_queue: per_peer\n"
      "shared_receive_buffers: 100\n"
      "send_buffers: 48\n"
      "registered_memory_limit: 2GiB\n"
      "max_message_size: 1G\n"
      "send_queue_limit: 8M\n"
      "flow_window: 65536\n"
      "receive_memory_limit: 1GiB\n"
      "heartbeat_interval: 500ms\n"
      "heartbeat_timeout: 2s\n"
      "reconnect_backoff_min: 1s\n"
      "reconnect_backoff_max: 1m\n"
      "connect_timeout: 1h\n"
      "message_timeout: 90s\n"
      "connect: on_demand\n"
      "idle_timeout: 10m\n"
      "log_level: debug\n"
      "metrics_listen: 127.0.0.1:9471\n");
  one("problems.yaml",  // several problems at once
      "node: alpha\n"
      "peers:\n"
      "  - name: beta\n"
      "    address: 10.0.0.2\n"
      "  - name: beta\n"
      "    address: 10.0.0.2:7471\n"
      "buffer_size: lots\n"
      "heartbeat_timeout: 1s\n"
      "log_levle: info\n"
      "message_timeout: 1d\n");
}

// --- shared-memory ring images ----------------------------------------------

// A region of `capacity` whose indexes start at `start`, holding records of
// the given payload sizes (reserved and committed by the real producer);
// with `frameEvery` k, every k-th is a frame record.
void shmRing(const fs::path& path, size_t capacity, uint64_t start,
             std::initializer_list<size_t> sizes, size_t frameEvery = 0) {
  struct alignas(64) Line {
    std::byte bytes[64];
  };
  std::vector<Line> lines(shm_ring::regionSize(capacity) / 64);
  const std::span<std::byte> region(lines.front().bytes, lines.size() * 64);
  if (!shm_ring::format(region, capacity)) throw std::runtime_error("ring format");
  std::memcpy(region.data() + shm_ring::kProducerOffset, &start, sizeof start);
  std::memcpy(region.data() + shm_ring::kConsumerOffset, &start, sizeof start);
  ShmRingProducer producer = ShmRingProducer::attach(region).value();
  uint8_t fill = 1;
  size_t i = 0;
  for (size_t n : sizes) {
    const bool frame = frameEvery != 0 && ++i % frameEvery == 0;
    Result<std::span<std::byte>> room =
        producer.reserve(n, frame ? shm_ring::kFrameRecord : shm_ring::kDataRecord);
    if (!room) throw std::runtime_error("ring reserve: " + room.status().toString());
    std::memset(room.value().data(), fill++, n);
    if (!producer.commit()) throw std::runtime_error("ring commit");
  }
  writeFile(path, region);
}

// Payload records (ring version 3) between data records: blocks of a
// payload area of shm_payload::kMinCapacity, one of them outside it and
// one naming a slot twice.
void shmPayloads(const fs::path& path) {
  struct alignas(64) Line {
    std::byte bytes[64];
  };
  std::vector<Line> lines(shm_ring::regionSize(512) / 64);
  const std::span<std::byte> region(lines.front().bytes, lines.size() * 64);
  if (!shm_ring::format(region, 512)) throw std::runtime_error("ring format");
  ShmRingProducer producer = ShmRingProducer::attach(region).value();
  const shm_payload::Descriptor blocks[] = {
      {0, 0, 0, 20000}, {1, 0, 20032, 30000}, {2, 0, 65000, 4096}, {1, 0, 0, 64}};
  for (const shm_payload::Descriptor& d : blocks) {
    for (uint32_t type : {shm_ring::kDataRecord, shm_ring::kPayloadRecord}) {
      Result<std::span<std::byte>> room = producer.reserve(sizeof d, type);
      if (!room) throw std::runtime_error("ring reserve: " + room.status().toString());
      std::memcpy(room.value().data(), &d, sizeof d);
      if (!producer.commit()) throw std::runtime_error("ring commit");
    }
  }
  writeFile(path, region);
}

void pubsubEnvelopes(const fs::path& dir) {
  using namespace pubsub;
  const auto pub = [&](const char* name, PubEnvelope e, const char* payload) {
    ByteBuffer b;
    encodePub(b, e, bytesOf(payload));
    writeFile(dir / name, b.readable());
  };
  PubEnvelope plain;
  plain.token = 7;
  plain.subject = "orders.x.eu";
  pub("pub", plain, "an order");
  PubEnvelope request = plain;
  request.request = true;
  request.replyTo = "alpha/3/4";
  request.groups = {"workers", "auditors"};
  pub("request_with_groups", request, "ping");
  ByteBuffer reply;
  encodeReply(reply, 3, 4, bytesOf("pong"));
  writeFile(dir / "reply", reply.readable());
  const std::string token = replyToken("alpha", 3, 4);
  writeFile(dir / "token", std::as_bytes(std::span(token)));
}

// --- batch authentication -----------------------------------------------------

// The batch_auth_fuzz target's keys (the same fixed transcript).
peer::SessionKeys fuzzKeys() {
  peer::auth::Transcript t;
  t.dialer = "alpha";
  t.acceptor = "beta";
  t.dialerIncarnation = 1;
  t.acceptorIncarnation = 2;
  t.binding.dialerQpn = 0x11;
  t.binding.acceptorQpn = 0x22;
  return peer::deriveSessionKeys(std::string(32, 'k'), t).value();
}

// Received batches (op byte: the genuine batches taken before, 0..3), each
// genuine at its place; and batch bodies for each alteration (op 0x80 + n;
// + 0x08 encrypted).
void batchAuths(const fs::path& dir) {
  const peer::SessionKeys k = fuzzKeys();
  peer::BatchAuth sender;
  if (!sender.start(k.dialerToAcceptor, k.acceptorToDialer).ok())
    throw std::runtime_error("no AES-256-GCM from OpenSSL");
  const auto batch = [](auto fill) {
    std::vector<std::byte> b(512);
    peer::BatchWriter w;
    w.reset(b.data(), b.size() - peer::kBatchTrailerSize);
    fill(w);
    b.resize(w.finish(2));
    return b;
  };
  std::vector<std::byte> empty(sizeof(peer::BatchHeader) + peer::kBatchTrailerSize);
  const uint32_t headerOnly = sizeof(peer::BatchHeader);
  std::memcpy(empty.data() + offsetof(peer::BatchHeader, length), &headerOnly, 4);
  const auto seal = [&](std::vector<std::byte> b, uint8_t op) {
    const size_t length = b.size();
    b.resize(length + peer::kBatchTrailerSize);
    b.resize(sender.seal(b.data(), length).value());
    b.insert(b.begin(), std::byte{op});
    return b;
  };
  // The filler batches the target takes first, as the sender saw them.
  for (int i = 0; i < 3; i++) {
    std::vector<std::byte> filler(empty.begin(), empty.end() - peer::kBatchTrailerSize);
    seal(filler, 0);
  }
  writeFile(dir / "message_4", seal(batch([](peer::BatchWriter& w) {
                                      w.addMessage(1, peer::kFirstFragment | peer::kLastFragment,
                                                   "src", "inbox", 0, bytesOf("hello"));
                                    }),
                                    3));
  const std::vector<std::byte> body = batch([](peer::BatchWriter& w) {
    w.addConfirm(1, 4, 0);
    w.addMessage(2, peer::kFirstFragment | peer::kLastFragment, "src", "inbox", 0,
                 bytesOf("a message"));
  });
  for (uint8_t alteration = 0; alteration < 6; alteration++) {
    for (uint8_t encrypted : {0, 0x08}) {
      std::vector<std::byte> in{std::byte{static_cast<uint8_t>(0x80 + encrypted + alteration)}};
      in.insert(in.end(), body.begin(), body.end());
      writeFile(dir / ((encrypted != 0 ? "encrypted_" : "altered_") + std::to_string(alteration)),
                in);
    }
  }
}

void shmRings(const fs::path& dir) {
  shmRing(dir / "empty", 64, 0, {});
  shmRing(dir / "records", 256, 0, {0, 1, 7, 8, 20, 100});
  shmRing(dir / "wrapped", 256, 256 * 5 - 16, {10, 40, 3});  // a padding record, then the rest
  shmRing(dir / "full", 128, 64, {56, 24, 16});
  shmRing(dir / "frames", 512, 0, {16, 40, 8, 64, 24, 0, 32}, 2);  // frame records between data
  shmPayloads(dir / "payloads");
}

}  // namespace
}  // namespace rdmamsg

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: make_corpus CORPUS_DIR REFERENCE_YAML\n";
    return 2;
  }
  namespace fs = std::filesystem;
  const fs::path root = argv[1];
  try {
    for (const char* target :
         {"local_frame_fuzz", "peer_batch_fuzz", "peer_hello_fuzz", "batch_auth_fuzz",
          "config_fuzz", "shm_ring_fuzz", "pubsub_envelope_fuzz"})
      fs::create_directories(root / target);
    rdmamsg::pubsubEnvelopes(root / "pubsub_envelope_fuzz");
    rdmamsg::localFrames(root / "local_frame_fuzz");
    rdmamsg::peerBatches(root / "peer_batch_fuzz");
    rdmamsg::peerHellos(root / "peer_hello_fuzz");
    rdmamsg::batchAuths(root / "batch_auth_fuzz");
    rdmamsg::configs(root / "config_fuzz", argv[2]);
    rdmamsg::shmRings(root / "shm_ring_fuzz");
  } catch (const std::exception& e) {
    std::cerr << "make_corpus: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
