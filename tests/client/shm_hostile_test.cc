// The daemon's side of the shared-memory channel against clients that do not
// follow the rules: offers it must refuse (the client goes on over its
// socket), and rings a client corrupts — the daemon closes that client with
// the reason on its socket and keeps serving everyone else.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "../local/raw_client.h"
#include "../support/wait.h"
#include "common/fd_passing.h"
#include "common/shm_doorbell.h"
#include "common/shm_payload_area.h"
#include "common/shm_region.h"
#include "common/shm_ring.h"
#include "rdmamsg/client.h"
#include "test_server.h"

namespace rdmamsg {
namespace {

using namespace std::chrono_literals;
using test::RawClient;
using test::ThreadedServer;

constexpr size_t kCapacity = size_t{64} << 10;
const size_t kRingBytes = shm_ring::regionSize(kCapacity);

std::span<const std::byte> bytes(std::string_view s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

// A client that sets the channel up by hand, so that it can break it.
class HostileClient {
 public:
  explicit HostileClient(const std::string& socket) : raw_(socket) {}

  // HELLO and SHM_OFFER with `fds` (a region of two formatted rings and two
  // doorbells when empty); the daemon's answer to the offer.
  proto::FrameKind offer(std::vector<int> fds = {}, uint64_t toDaemon = kCapacity,
                         uint64_t payloadCapacity = 0) {
    if (fds.empty()) {
      auto region =
          ShmRegion::create("hostile", 2 * kRingBytes + shm_payload::regionSize(payloadCapacity));
      if (!region) return proto::FrameKind::bye;
      region_ = std::move(region.value());
      if (!shm_ring::format(region_.bytes().first(kRingBytes), kCapacity, payloadCapacity))
        return {};
      if (!shm_ring::format(region_.bytes().subspan(kRingBytes, kRingBytes), kCapacity)) return {};
      daemonBell_ = std::move(ShmDoorbell::create().value());
      clientBell_ = std::move(ShmDoorbell::create().value());
      fds = {region_.fd(), daemonBell_.fd(), clientBell_.fd()};
    }
    proto::encodeHello(raw_.out(), "hostile");
    proto::encodeShmOffer(raw_.out(), shm_ring::kVersion, toDaemon, kCapacity);
    if (fds.empty() || fds[0] < 0) {
      raw_.write();
    } else {
      auto sent = sendFds(raw_.fd(), fds, raw_.out().readable());
      if (!sent) return proto::FrameKind::bye;
      raw_.out().consume(*sent);
      raw_.write();
    }
    proto::FrameKind answer = proto::FrameKind::bye;
    test::waitFor([&] {
      proto::Frame f;
      while (raw_.next(f)) {
        if (f.kind == proto::FrameKind::welcome) continue;
        answer = f.kind;
        if (f.kind == proto::FrameKind::error) errorText_ = std::string(f.text);
        return true;
      }
      return raw_.sawEof();
    });
    return answer;
  }

  RawClient& raw() { return raw_; }
  const std::string& errorText() const { return errorText_; }
  std::span<std::byte> region() { return region_.bytes(); }
  void ringDaemon() { (void)daemonBell_.ring(); }
  std::atomic_ref<uint64_t> word(size_t offset) {
    return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(region_.bytes().data() + offset));
  }

  // The daemon's closing ERROR on the socket, then its end.
  bool closedWith(Errc code, std::string* text) {
    bool sawError = false;
    const bool ended = test::waitFor([&] {
      proto::Frame f;
      while (raw_.next(f)) {
        if (f.kind != proto::FrameKind::error || f.errc != code) continue;
        sawError = true;
        *text = std::string(f.text);
      }
      return raw_.sawEof();
    });
    return ended && sawError;
  }

 private:
  RawClient raw_;
  ShmRegion region_;
  ShmDoorbell daemonBell_, clientBell_;
  std::string errorText_;
};

// A well-behaved client of the same daemon still gets its own message back.
void expectServed(const std::string& socket, std::string_view text) {
  static int clients = 0;
  const std::string service = "good" + std::to_string(++clients);
  auto good = Client::connect(socket);
  ASSERT_TRUE(good.ok()) << good.status().toString();
  ASSERT_TRUE(good->registerService(service).ok());
  ASSERT_TRUE(good->send("nodeA", service, bytes(text)).ok());
  Message m;
  ASSERT_TRUE(good->receive(m, 5s).ok());
  EXPECT_EQ(m.text(), text);
  Completion c;
  ASSERT_TRUE(good->waitCompletion(c, 5s).ok());
  EXPECT_TRUE(c.status.ok()) << c.status.toString();
}

TEST(ShmHostileTest, TheLibraryUsesSharedMemoryByDefaultAndTheEnvironmentTurnsItOff) {
  ThreadedServer server;
  auto c = Client::connect(server.socket());
  ASSERT_TRUE(c.ok()) << c.status().toString();
  const char* env = std::getenv("RDMAMSG_SHM");
  EXPECT_EQ(c->usesSharedMemory(), !(env != nullptr && std::string_view(env) == "0"));
  ConnectOptions off;
  off.sharedMemory = false;
  auto s = Client::connect(server.socket(), off);
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->usesSharedMemory());
}

TEST(ShmHostileTest, AnOfferWithoutDescriptorsIsRefusedAndTheSocketGoesOn) {
  ThreadedServer server;
  HostileClient h(server.socket());
  ASSERT_EQ(h.offer({-1}), proto::FrameKind::error);
  EXPECT_NE(h.errorText().find("0 descriptors"), std::string::npos) << h.errorText();
  proto::encodeRegister(h.raw().out(), "still");
  h.raw().write();
  proto::Frame f;
  ASSERT_TRUE(test::waitFor([&] { return h.raw().next(f); }));
  EXPECT_EQ(f.kind, proto::FrameKind::registered);
}

TEST(ShmHostileTest, AnUnsealedRegionIsRefused) {
  ThreadedServer server;
  // A memfd the client could shrink under the daemon's mapping.
  UniqueFd memfd(::memfd_create("unsealed", MFD_CLOEXEC));
  ASSERT_TRUE(memfd.valid());
  ASSERT_EQ(::ftruncate(memfd.get(), static_cast<off_t>(2 * kRingBytes)), 0);
  auto bell = ShmDoorbell::create();
  HostileClient h(server.socket());
  ASSERT_EQ(h.offer({memfd.get(), bell->fd(), bell->fd()}), proto::FrameKind::error);
  EXPECT_NE(h.errorText().find("seal"), std::string::npos) << h.errorText();
  expectServed(server.socket(), "after an unsealed offer");
}

TEST(ShmHostileTest, ACapacityOutOfRangeIsRefused) {
  ThreadedServer server;
  HostileClient h(server.socket());
  ASSERT_EQ(h.offer({}, uint64_t{1} << 40), proto::FrameKind::error);
  EXPECT_NE(h.errorText().find("capacity"), std::string::npos) << h.errorText();
}

TEST(ShmHostileTest, ACorruptIndexClosesThatClientWithTheReason) {
  ThreadedServer server;
  HostileClient h(server.socket());
  ASSERT_EQ(h.offer(), proto::FrameKind::shm_accept);
  // A producer index that is not 8-byte aligned, then the doorbell.
  h.word(shm_ring::kProducerOffset).store(3);
  h.ringDaemon();
  std::string why;
  ASSERT_TRUE(h.closedWith(Errc::protocol_error, &why));
  EXPECT_NE(why.find("ring"), std::string::npos) << why;
  expectServed(server.socket(), "after a corrupt ring");
}

TEST(ShmHostileTest, BytesOnTheSocketAfterTheSwitchAreAProtocolError) {
  ThreadedServer server;
  HostileClient h(server.socket());
  ASSERT_EQ(h.offer(), proto::FrameKind::shm_accept);
  proto::encodeRegister(h.raw().out(), "sideways");
  h.raw().write();
  std::string why;
  ASSERT_TRUE(h.closedWith(Errc::protocol_error, &why));
  EXPECT_NE(why.find("control socket"), std::string::npos) << why;
}

// A client that scribbles over both of its rings while the daemon reads
// them: whatever the daemon reads, it stays up (under AddressSanitizer: it
// never touches memory outside the region) and serves the others; the
// scribbler is closed or, if what it wrote happened to parse, left alone.
TEST(ShmHostileTest, AScribblerHurtsNobodyElse) {
  ThreadedServer server;
  HostileClient h(server.socket());
  ASSERT_EQ(h.offer(), proto::FrameKind::shm_accept);
  std::atomic<bool> stop{false};
  std::thread scribbler([&] {
    std::mt19937_64 rng(7);
    const auto words = h.region().size() / 8;
    for (int i = 0; i < 2'000'000 && !stop.load(); ++i) {
      const size_t at = (rng() % words) * 8;
      // Mostly small values, so that indexes and lengths look plausible.
      const uint64_t v = rng() % 4 == 0 ? rng() : rng() % (2 * kCapacity);
      std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(h.region().data() + at)).store(v);
      if (i % 1000 == 0) h.ringDaemon();
    }
  });
  for (int i = 0; i < 20; ++i)
    expectServed(server.socket(), "while scribbled on " + std::to_string(i));
  stop = true;
  scribbler.join();
  expectServed(server.socket(), "after the scribbler");
}

// Records written by hand into the ring to the daemon: `frames` as one
// record of `type` each, then the doorbell.
void writeRecords(HostileClient& h, uint32_t type, const std::vector<ByteBuffer>& frames) {
  auto producer = ShmRingProducer::attach(h.region().first(kRingBytes));
  ASSERT_TRUE(producer.ok()) << producer.status().toString();
  for (const ByteBuffer& f : frames) {
    auto room = producer->reserve(f.size(), type);
    ASSERT_TRUE(room.ok()) << room.status().toString();
    std::copy(f.data(), f.data() + f.size(), room->begin());
    ASSERT_TRUE(producer->commit().ok());
  }
  h.ringDaemon();
}

TEST(ShmHostileTest, AFrameRecordThatIsNotASendClosesThatClientWithTheReason) {
  ThreadedServer server;
  HostileClient h(server.socket());
  ASSERT_EQ(h.offer(), proto::FrameKind::shm_accept);
  ByteBuffer reg;
  proto::encodeRegister(reg, "sideways");
  writeRecords(h, shm_ring::kFrameRecord, {reg});
  std::string why;
  ASSERT_TRUE(h.closedWith(Errc::protocol_error, &why));
  EXPECT_NE(why.find("other than SEND"), std::string::npos) << why;
  expectServed(server.socket(), "after a frame record that is not a SEND");
}

TEST(ShmHostileTest, AFrameRecordInsideAFrameClosesThatClientWithTheReason) {
  ThreadedServer server;
  HostileClient h(server.socket());
  ASSERT_EQ(h.offer(), proto::FrameKind::shm_accept);
  ByteBuffer reg, half, send;
  proto::encodeRegister(reg, "cut");
  half.append(reg.data(), reg.size() / 2);
  const std::string payload(20000, 'p');
  proto::encodeSend(send, 1, "nodeA", "cut", "", bytes(payload));
  writeRecords(h, shm_ring::kDataRecord, {half});
  writeRecords(h, shm_ring::kFrameRecord, {send});
  std::string why;
  ASSERT_TRUE(h.closedWith(Errc::protocol_error, &why));
  EXPECT_NE(why.find("cut a frame"), std::string::npos) << why;
  expectServed(server.socket(), "after a frame record inside a frame");
}

// A frame record whose SEND says another length than the record's.
TEST(ShmHostileTest, AFrameRecordOfTheWrongLengthClosesThatClientWithTheReason) {
  ThreadedServer server;
  HostileClient h(server.socket());
  ASSERT_EQ(h.offer(), proto::FrameKind::shm_accept);
  ByteBuffer send;
  const std::string payload(20000, 'p');
  proto::encodeSend(send, 1, "nodeA", "cut", "", bytes(payload));
  send.append(bytes("trailing"));
  writeRecords(h, shm_ring::kFrameRecord, {send});
  std::string why;
  ASSERT_TRUE(h.closedWith(Errc::protocol_error, &why));
  EXPECT_NE(why.find("length"), std::string::npos) << why;
  expectServed(server.socket(), "after a frame record of the wrong length");
}

// A payload record that names a block outside the payload area: the daemon
// reads nothing outside it and closes that client with the reason.
TEST(ShmHostileTest, APayloadRecordOutsideTheAreaClosesThatClientWithTheReason) {
  ThreadedServer server;
  HostileClient h(server.socket());
  constexpr uint64_t kArea = shm_payload::kMinCapacity;
  ASSERT_EQ(h.offer({}, kCapacity, kArea), proto::FrameKind::shm_accept);
  ByteBuffer record;
  const shm_payload::Descriptor d{3, 0, kArea - 64, 4096};
  record.append(std::as_bytes(std::span(&d, 1)));
  writeRecords(h, shm_ring::kPayloadRecord, {record});
  std::string why;
  ASSERT_TRUE(h.closedWith(Errc::protocol_error, &why));
  EXPECT_NE(why.find("is not inside the area"), std::string::npos) << why;
  expectServed(server.socket(), "after a payload record outside the area");
}

// Large messages go as payload records or frame records (held in place by
// the daemon) between small ones in the frame stream, and come back in the
// delivery area or the ring: all arrive whole and in order, read by
// receive() and by views, and the areas' and the rings' room comes back
// (more than their capacity goes through them). With areas of 8 MiB (the
// default), of 64 KiB (full most of the time: the rings beside them) and
// none.
class LargeSends : public ::testing::TestWithParam<std::pair<size_t, size_t>> {};

TEST_P(LargeSends, ArriveWholeAndInOrderBetweenSmallOnes) {
  ThreadedServer server;
  ConnectOptions opts;
  opts.payloadAreaCapacity = GetParam().first;
  opts.deliveryAreaCapacity = GetParam().second;
  auto c = Client::connect(server.socket(), opts);
  ASSERT_TRUE(c.ok()) << c.status().toString();
  if (!c->usesSharedMemory()) GTEST_SKIP() << "RDMAMSG_SHM=0";
  ASSERT_TRUE(c->registerService("mixed").ok());
  constexpr int kCount = 400;  // about 5 MiB through a ring of 1 MiB
  auto text = [](int i) {
    const size_t kLarge[] = {16 << 10, 24 << 10, 40 << 10,
                             60 << 10};  // the test daemon's max: 64 KiB
    return i % 3 == 2 ? std::string(kLarge[i % 4], static_cast<char>('a' + i % 26))
                      : "small " + std::to_string(i);
  };
  int received = 0;
  // Every other message is viewed in place, the rest copied out.
  auto take = [&](bool wait) {
    if (received % 2 == 0) {
      Message m;
      if (!(wait ? c->receive(m, 5s).ok() : c->tryReceive(m))) return false;
      EXPECT_EQ(m.text(), text(received)) << "message " << received;
    } else {
      MessageView v;
      if (!(wait ? c->receiveView(v, 5s).ok() : c->tryReceiveView(v))) return false;
      EXPECT_EQ(v.text(), text(received)) << "view " << received;
      EXPECT_TRUE(c->release(v).ok());
    }
    ++received;
    return true;
  };
  for (int i = 0; i < kCount; ++i) {
    ASSERT_TRUE(c->send("nodeA", "mixed", bytes(text(i))).ok());
    while (take(false)) {
    }
  }
  while (received < kCount)
    ASSERT_TRUE(take(true)) << "message " << received;
}

INSTANTIATE_TEST_SUITE_P(ShmHostileTest, LargeSends,
                         ::testing::Values(std::pair{size_t{8} << 20, size_t{8} << 20},
                                           std::pair{shm_payload::kMinCapacity,
                                                     shm_payload::kMinCapacity},
                                           std::pair{size_t{0}, size_t{0}}));

}  // namespace
}  // namespace rdmamsg
