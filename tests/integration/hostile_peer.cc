// A hostile peer for integration tests: it completes rdmamsg's peer
// handshake as a configured node (from that node's address), then breaks
// the peer protocol in one chosen way, and reports what the daemon did.
//
//   hostile_peer --connect HOST:PORT --bind HOST --name NODE --target NODE --mode MODE
//   hostile_peer --listen HOST:PORT --name NODE --target NODE --mode acceptor-...
//
// Modes: bad-batch (not a batch), bad-record (an unknown record type),
// credits (returns more credits than it was ever given), release (gives back
// more credits than it holds), sequence (a message
// out of sequence), fragment (fragments longer than the message they
// announce), confirm (confirms a message never sent), auth (an
// authentication record after the handshake), resume (a resume record
// without having offered resume in its Hello), move (a move to another
// rail, likewise), results (a count of results read, likewise),
// unknown-service (a well-formed message for a service nobody registered),
// oversize (a message announced
// larger than the daemon's max_message_size). Against a daemon with a mesh
// secret, which it does not know: auth-wrong-proof (a proof made up),
// auth-data-first (a batch of something else before any proof), auth-silent
// (no proof at all). Listening as the node the daemon dials, against a daemon
// with a mesh secret: acceptor-wrong-proof (answers the daemon's proof with a
// made-up one), acceptor-data-first (sends a batch of something else first).
// With --secret FILE, auth-good proves that secret like a daemon would (a
// restarted node): prints "authenticated" once the daemon's proof checks out.
//
// Prints "established", then "disconnected" when the daemon closes the
// connection, or "confirm SEQ ERRC" for each confirmation it receives.
// Exits 0 once it saw one of those, 1 when nothing happened within 10 s,
// 2 on usage or setup errors. Runs under softrdma-run like the daemon.
#include <arpa/inet.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <rdma/rdma_cma.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "daemon/peer/auth.h"
#include "daemon/peer/protocol.h"

using namespace rdmamsg::peer;
using Clock = std::chrono::steady_clock;

namespace {

constexpr uint32_t kBufferSize = 64 * 1024;
constexpr uint32_t kBuffers = 16;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "hostile_peer: %s: %s\n", what.c_str(), std::strerror(errno));
  std::exit(2);
}

sockaddr_storage parse(const std::string& text, bool withPort) {
  std::string host = text, port = "0";
  if (withPort) {
    auto colon = text.rfind(':');
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0) die("address " + text);
  sockaddr_storage out{};
  std::memcpy(&out, res->ai_addr, res->ai_addrlen);
  freeaddrinfo(res);
  return out;
}

struct Link {
  rdma_event_channel* channel = nullptr;
  rdma_cm_id* listener = nullptr;
  rdma_cm_id* id = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  std::vector<std::byte> recv, send;
  ibv_mr *recvMr = nullptr, *sendMr = nullptr;
  Hello remote{};
  std::vector<uint8_t> rep;  // the REP's private data (dialer)
};

// Waits for one CM event (the channel is nonblocking) until `deadline`.
bool nextEvent(Link& l, rdma_cm_event_type& type, std::vector<uint8_t>* data,
               Clock::time_point deadline) {
  while (Clock::now() < deadline) {
    rdma_cm_event* e = nullptr;
    if (rdma_get_cm_event(l.channel, &e) == 0) {
      type = e->event;
      if (data != nullptr)
        data->assign(static_cast<const uint8_t*>(e->param.conn.private_data),
                     static_cast<const uint8_t*>(e->param.conn.private_data) +
                         e->param.conn.private_data_len);
      if (type == RDMA_CM_EVENT_REJECTED && e->param.conn.private_data_len >= 8) {
        auto h = decodeHello(e->param.conn.private_data, e->param.conn.private_data_len);
        if (h) std::fprintf(stderr, "hostile_peer: rejected: %s\n", toString(h->reason));
      }
      if (type == RDMA_CM_EVENT_CONNECT_REQUEST && l.id != nullptr) {
        // A listener already serving a connection: the daemon dialed again
        // (its previous attempt timed out). Refused, and waited past.
        Hello no{};
        no.reason = RejectReason::kDuplicate;
        rdma_cm_id* again = e->id;
        rdma_reject(again, &no, sizeof no);
        rdma_ack_cm_event(e);
        rdma_destroy_id(again);
        continue;
      }
      rdma_ack_cm_event(e);
      return true;
    }
    if (errno != EAGAIN) die("rdma_get_cm_event");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

bool expect(Link& l, rdma_cm_event_type want, std::vector<uint8_t>* data = nullptr) {
  rdma_cm_event_type got{};
  if (!nextEvent(l, got, data, Clock::now() + std::chrono::seconds(5))) return false;
  if (got != want) {
    std::fprintf(stderr, "hostile_peer: %s instead of %s\n", rdma_event_str(got),
                 rdma_event_str(want));
    return false;
  }
  return true;
}

void setupQp(Link& l);

// One attempt to connect; false when refused (e.g. the daemon was dialing).
bool connectOnce(Link& l, const sockaddr_storage& src, const sockaddr_storage& dst,
                 const Hello& hello) {
  l.channel = rdma_create_event_channel();
  if (l.channel == nullptr) die("rdma_create_event_channel");
  fcntl(l.channel->fd, F_SETFL, fcntl(l.channel->fd, F_GETFL) | O_NONBLOCK);
  if (rdma_create_id(l.channel, &l.id, nullptr, RDMA_PS_TCP) != 0) die("rdma_create_id");
  if (rdma_resolve_addr(l.id, (sockaddr*)&src, (sockaddr*)&dst, 2000) != 0)
    die("rdma_resolve_addr");
  if (!expect(l, RDMA_CM_EVENT_ADDR_RESOLVED)) return false;
  if (rdma_resolve_route(l.id, 2000) != 0) die("rdma_resolve_route");
  if (!expect(l, RDMA_CM_EVENT_ROUTE_RESOLVED)) return false;
  setupQp(l);
  rdma_conn_param p{};
  p.private_data = &hello;
  p.private_data_len = sizeof hello;
  p.retry_count = 7;
  p.rnr_retry_count = 7;
  if (rdma_connect(l.id, &p) != 0) die("rdma_connect");
  std::vector<uint8_t>& data = l.rep;
  if (!expect(l, RDMA_CM_EVENT_ESTABLISHED, &data)) return false;
  auto h = decodeHello(data.data(), data.size());
  if (!h) return false;
  l.remote = *h;
  return true;
}

// Listens at `at` for the daemon's dial and accepts it, as an authenticating
// acceptor (its Hello and a nonce in the REP).
bool acceptOnce(Link& l, const sockaddr_storage& at, const Hello& hello) {
  l.channel = rdma_create_event_channel();
  if (l.channel == nullptr) die("rdma_create_event_channel");
  fcntl(l.channel->fd, F_SETFL, fcntl(l.channel->fd, F_GETFL) | O_NONBLOCK);
  if (rdma_create_id(l.channel, &l.listener, nullptr, RDMA_PS_TCP) != 0) die("rdma_create_id");
  if (rdma_bind_addr(l.listener, (sockaddr*)&at) != 0) die("rdma_bind_addr");
  if (rdma_listen(l.listener, 4) != 0) die("rdma_listen");
  const auto deadline = Clock::now() + std::chrono::seconds(15);
  std::vector<uint8_t> req;
  while (l.id == nullptr) {
    if (Clock::now() > deadline) return false;
    rdma_cm_event* e = nullptr;
    if (rdma_get_cm_event(l.channel, &e) != 0) {
      if (errno != EAGAIN) die("rdma_get_cm_event");
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      continue;
    }
    rdma_cm_id* refused = nullptr;
    if (e->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
      // Only the daemon under test: other nodes dialing this name are refused.
      auto h = decodeHello(e->param.conn.private_data, e->param.conn.private_data_len);
      if (h && h->nodeId == hello.targetId) {
        l.id = e->id;
        req.assign(static_cast<const uint8_t*>(e->param.conn.private_data),
                   static_cast<const uint8_t*>(e->param.conn.private_data) +
                       e->param.conn.private_data_len);
      } else {
        Hello no{};
        no.reason = RejectReason::kDuplicate;
        rdma_reject(e->id, &no, sizeof no);
        refused = e->id;
      }
    }
    rdma_ack_cm_event(e);
    if (refused != nullptr) rdma_destroy_id(refused);  // after its event is acknowledged
  }
  auto h = decodeHello(req.data(), req.size());
  if (!h) return false;
  l.remote = *h;
  setupQp(l);
  AcceptData d{};
  d.hello = hello;
  std::mt19937_64 rng{std::random_device{}()};
  for (auto& b : d.nonce)
    b = static_cast<uint8_t>(rng());
  rdma_conn_param p{};
  p.private_data = &d;
  p.private_data_len = sizeof d;
  p.rnr_retry_count = 7;
  if (rdma_accept(l.id, &p) != 0) die("rdma_accept");
  return expect(l, RDMA_CM_EVENT_ESTABLISHED);
}

void setupQp(Link& l) {
  l.pd = ibv_alloc_pd(l.id->verbs);
  l.cq = ibv_create_cq(l.id->verbs, 2 * kBuffers + 4, nullptr, nullptr, 0);
  if (l.pd == nullptr || l.cq == nullptr) die("ibv_alloc_pd/ibv_create_cq");
  ibv_qp_init_attr a{};
  a.send_cq = a.recv_cq = l.cq;
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = kBuffers;
  a.cap.max_recv_wr = kBuffers;
  a.cap.max_send_sge = a.cap.max_recv_sge = 1;
  if (rdma_create_qp(l.id, l.pd, &a) != 0) die("rdma_create_qp");
  l.recv.assign(size_t{kBufferSize} * kBuffers, std::byte{0});
  l.send.assign(size_t{kBufferSize} * kBuffers, std::byte{0});
  l.recvMr = ibv_reg_mr(l.pd, l.recv.data(), l.recv.size(), IBV_ACCESS_LOCAL_WRITE);
  l.sendMr = ibv_reg_mr(l.pd, l.send.data(), l.send.size(), IBV_ACCESS_LOCAL_WRITE);
  if (l.recvMr == nullptr || l.sendMr == nullptr) die("ibv_reg_mr");
  for (uint32_t i = 0; i < kBuffers; i++) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(l.recv.data()) + size_t{i} * kBufferSize, kBufferSize,
                l.recvMr->lkey};
    ibv_recv_wr w{}, *bad = nullptr;
    w.wr_id = i;
    w.sg_list = &sge;
    w.num_sge = 1;
    if (ibv_post_recv(l.id->qp, &w, &bad) != 0) die("ibv_post_recv");
  }
}

void teardown(Link& l) {
  if (l.id != nullptr && l.id->qp != nullptr) rdma_destroy_qp(l.id);
  if (l.recvMr != nullptr) ibv_dereg_mr(l.recvMr);
  if (l.sendMr != nullptr) ibv_dereg_mr(l.sendMr);
  if (l.cq != nullptr) ibv_destroy_cq(l.cq);
  if (l.pd != nullptr) ibv_dealloc_pd(l.pd);
  if (l.id != nullptr) rdma_destroy_id(l.id);
  if (l.listener != nullptr) rdma_destroy_id(l.listener);
  if (l.channel != nullptr) rdma_destroy_event_channel(l.channel);
  l = Link{};
}

uint32_t sent = 0;

void post(Link& l, const std::byte* bytes, size_t n) {
  std::byte* buf = l.send.data() + size_t{sent % kBuffers} * kBufferSize;
  std::memcpy(buf, bytes, n);
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf), static_cast<uint32_t>(n), l.sendMr->lkey};
  ibv_send_wr w{}, *bad = nullptr;
  w.wr_id = 1000 + sent++;
  w.sg_list = &sge;
  w.num_sge = 1;
  w.opcode = IBV_WR_SEND;
  w.send_flags = IBV_SEND_SIGNALED;
  if (ibv_post_send(l.id->qp, &w, &bad) != 0) die("ibv_post_send");
}

// Builds one batch with `fill` and sends it.
template <typename F>
void batch(Link& l, uint32_t credits, F fill) {
  std::vector<std::byte> b(kBufferSize);
  BatchWriter w;
  w.reset(b.data(), b.size());
  fill(w);
  post(l, b.data(), w.finish(credits));
}

std::span<const std::byte> bytesOf(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

}  // namespace

int main(int argc, char** argv) {
  std::string connect, bind, listen, name, target, mode, secretFile;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--connect")
      connect = v;
    else if (k == "--bind")
      bind = v;
    else if (k == "--listen")
      listen = v;
    else if (k == "--secret")
      secretFile = v;
    else if (k == "--name")
      name = v;
    else if (k == "--target")
      target = v;
    else if (k == "--mode")
      mode = v;
  }
  const bool acceptor = !listen.empty();
  if ((acceptor ? listen.empty() : connect.empty() || bind.empty()) || name.empty() ||
      target.empty() || mode.empty()) {
    std::fprintf(stderr,
                 "usage: hostile_peer (--connect HOST:PORT --bind HOST | --listen HOST:PORT) "
                 "--name NODE --target NODE --mode MODE\n");
    return 2;
  }
  Hello hello{};
  hello.nodeId = nodeId(name);
  hello.targetId = nodeId(target);
  hello.incarnation = std::random_device{}() | (uint64_t{std::random_device{}()} << 32);
  hello.bufferSize = kBufferSize;
  hello.bufferCount = kBuffers;
  hello.maxMessage = 16 << 20;
  hello.flowWindow = 4 << 20;
  if (mode.rfind("auth-", 0) == 0 || acceptor) hello.flags = kHelloAuthenticates | kHelloBatchMac;

  // The daemon may be dialing this name itself and refuse (duplicate): retry, bounded.
  Link l;
  bool up = false;
  if (acceptor) up = acceptOnce(l, parse(listen, true), hello);
  for (int attempt = 0; attempt < 50 && !up && !acceptor; attempt++) {
    up = connectOnce(l, parse(bind, false), parse(connect, true), hello);
    if (!up) {
      teardown(l);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  if (!up) {
    std::fprintf(stderr, "hostile_peer: could not connect\n");
    return 2;
  }
  std::printf("established\n");
  std::fflush(stdout);

  const std::string src1 = "intruder";
  std::string goodKey;
  rdmamsg::peer::auth::Transcript transcript;
  if (mode == "bad-batch") {
    std::vector<std::byte> junk(64, std::byte{0xff});
    post(l, junk.data(), junk.size());
  } else if (mode == "bad-record") {
    batch(l, 0, [](BatchWriter& w) { w.addHeartbeat(); });
    std::vector<std::byte> b(64);
    BatchHeader h{kBatchMagic, 1, 0, 0, 32};
    RecordHeader r{};
    r.type = static_cast<RecordType>(99);
    std::memcpy(b.data(), &h, sizeof h);
    std::memcpy(b.data() + 16, &r, sizeof r);
    post(l, b.data(), 32);
  } else if (mode == "credits") {
    batch(l, 1000, [](BatchWriter& w) { w.addHeartbeat(); });
  } else if (mode == "release") {
    std::vector<std::byte> b(kBufferSize);
    BatchWriter w;
    w.reset(b.data(), b.size());
    w.addHeartbeat();
    post(l, b.data(), w.finish(0, 0xffff));
  } else if (mode == "sequence") {
    batch(l, 0, [&](BatchWriter& w) {
      w.addMessage(5, kFirstFragment | kLastFragment, src1, "inbox", 0, bytesOf("early"));
    });
  } else if (mode == "fragment") {
    std::string part(80, 'x');
    batch(l, 0, [&](BatchWriter& w) {
      w.addMessage(1, kFirstFragment, src1, "inbox", 100, bytesOf(part));
    });
    batch(l, 0,
          [&](BatchWriter& w) { w.addMessage(1, kLastFragment, src1, "inbox", 0, bytesOf(part)); });
  } else if (mode == "confirm") {
    batch(l, 0, [](BatchWriter& w) { w.addConfirm(1, 3, 0); });
  } else if (mode == "resume") {
    batch(l, 0, [](BatchWriter& w) { w.addResume(ResumeKind::kContinue, 1, 1); });
  } else if (mode == "move") {
    batch(l, 0, [](BatchWriter& w) { w.addResume(ResumeKind::kMove, 1, 1); });
  } else if (mode == "results") {
    batch(l, 0, [](BatchWriter& w) { w.addResume(ResumeKind::kResults, 0, 1); });
  } else if (mode == "auth") {
    AuthBody a{};
    a.proofCount = 1;
    batch(l, 0, [&](BatchWriter& w) { w.addAuth(a); });
  } else if (mode == "auth-wrong-proof") {
    AuthBody a{};
    a.proofCount = 2;
    std::mt19937_64 rng{std::random_device{}()};
    for (auto* p : {a.nonce, a.proofs[0], a.proofs[1]})
      for (size_t i = 0; i < kProofSize; i++)
        p[i] = static_cast<uint8_t>(rng());
    batch(l, 0, [&](BatchWriter& w) { w.addAuth(a); });
  } else if (mode == "auth-data-first") {
    batch(l, 0, [](BatchWriter& w) { w.addHeartbeat(); });
  } else if (mode == "auth-good") {
    std::string key;
    if (FILE* f = std::fopen(secretFile.c_str(), "r")) {
      char buf[4096];
      key.assign(buf, std::fread(buf, 1, sizeof buf, f));
      std::fclose(f);
    }
    while (!key.empty() && (key.back() == '\n' || key.back() == ' '))
      key.pop_back();
    if (key.empty() || l.rep.size() < sizeof(AcceptData)) {
      std::fprintf(stderr, "hostile_peer: auth-good needs --secret and an acceptor nonce\n");
      return 2;
    }
    goodKey = key;
    transcript.dialer = name;
    transcript.acceptor = target;
    transcript.dialerIncarnation = hello.incarnation;
    transcript.acceptorIncarnation = l.remote.incarnation;
    transcript.dialerNonce = rdmamsg::peer::auth::freshNonce().value();
    std::memcpy(transcript.acceptorNonce.data(), l.rep.data() + offsetof(AcceptData, nonce),
                kNonceSize);
    // The proof is bound to this connection, as the daemon's is.
    ibv_qp_attr qa{};
    ibv_qp_init_attr qi{};
    if (ibv_query_qp(l.id->qp, &qa, IBV_QP_DEST_QPN | IBV_QP_AV, &qi) != 0) die("ibv_query_qp");
    transcript.binding.dialerQpn = l.id->qp->qp_num;
    transcript.binding.acceptorQpn = qa.dest_qp_num;
    std::memcpy(transcript.binding.dialerGid.data(), l.id->route.addr.addr.ibaddr.sgid.raw, 16);
    std::memcpy(transcript.binding.acceptorGid.data(), l.id->route.addr.addr.ibaddr.dgid.raw, 16);
    AuthBody a{};
    a.proofCount = 1;
    std::memcpy(a.nonce, transcript.dialerNonce.data(), kNonceSize);
    auto proof =
        rdmamsg::peer::auth::prove(goodKey, rdmamsg::peer::auth::Role::kDialer, transcript).value();
    std::memcpy(a.proofs[0], proof.data(), kProofSize);
    batch(l, 0, [&](BatchWriter& w) { w.addAuth(a); });
  } else if (mode == "acceptor-wrong-proof") {
    AuthBody a{};
    a.proofCount = 1;
    std::mt19937_64 rng{std::random_device{}()};
    for (auto& b : a.proofs[0])
      b = static_cast<uint8_t>(rng());
    batch(l, 0, [&](BatchWriter& w) { w.addAuth(a); });
  } else if (mode == "acceptor-data-first") {
    batch(l, 0, [](BatchWriter& w) { w.addHeartbeat(); });
  } else if (mode == "auth-silent") {
    // says nothing
  } else if (mode == "unknown-service") {
    batch(l, 0, [&](BatchWriter& w) {
      w.addMessage(1, kFirstFragment | kLastFragment, src1, "nosuchservice", 0, bytesOf("hi"));
    });
  } else if (mode == "oversize") {
    std::string part(100, 'y');
    batch(l, 0, [&](BatchWriter& w) {
      w.addMessage(1, kFirstFragment, src1, "inbox", uint64_t{1} << 30, bytesOf(part));
    });
    batch(l, 0,
          [&](BatchWriter& w) { w.addMessage(1, kLastFragment, src1, "inbox", 0, bytesOf(part)); });
  } else {
    std::fprintf(stderr, "hostile_peer: unknown mode %s\n", mode.c_str());
    return 2;
  }

  // What the daemon does: a confirmation, or the end of the connection.
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < deadline) {
    ibv_wc wc[8];
    int n = ibv_poll_cq(l.cq, 8, wc);
    bool confirmed = false;
    for (int i = 0; i < n; i++) {
      if (wc[i].status != IBV_WC_SUCCESS || wc[i].wr_id >= 1000) continue;
      std::span<const std::byte> bytes(l.recv.data() + wc[i].wr_id * kBufferSize, wc[i].byte_len);
      BatchReader r(bytes);
      if (!r.open()) continue;
      Record rec;
      while (r.next(rec)) {
        if (rec.type == RecordType::kAuth && !goodKey.empty() &&
            rdmamsg::peer::auth::verify(goodKey, rdmamsg::peer::auth::Role::kAcceptor, transcript,
                                        rec.auth.proofs[0])) {
          std::printf("authenticated\n");
          std::fflush(stdout);
        }
        if (rec.type == RecordType::kConfirm) {
          std::printf("confirm %llu %u\n", static_cast<unsigned long long>(rec.seq),
                      static_cast<unsigned>(rec.confirm.errc));
          confirmed = true;
        }
      }
    }
    if (confirmed) {
      std::fflush(stdout);
      rdma_disconnect(l.id);
      teardown(l);
      return 0;
    }
    rdma_cm_event* e = nullptr;
    if (rdma_get_cm_event(l.channel, &e) == 0) {
      bool gone = e->event == RDMA_CM_EVENT_DISCONNECTED;
      rdma_ack_cm_event(e);
      if (gone) {
        std::printf("disconnected\n");
        std::fflush(stdout);
        teardown(l);
        return 0;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  std::printf("nothing happened\n");
  teardown(l);
  return 1;
}
