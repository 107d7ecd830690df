// Client::Impl: moving bytes and records — the socket, or the rings of the
// shared-memory link — and the doorbell work around sleeping and waking
// (see client_impl.h). The parts move bytes; Impl parses what they read
// and turns their failures into the connection's loss.
#include <utility>

#include "client/client_impl.h"

namespace rdmamsg {
namespace {

using Clock = std::chrono::steady_clock;
using detail::kReadChunk;

// A client that spins on the rings (adaptive, busy) looks at its socket this
// often for a closing ERROR or its end (one recv(2)); a sleeping one polls it.
constexpr auto kSocketLook = std::chrono::milliseconds(1);

}  // namespace

void Client::Impl::lose(Status why) {
  if (conn.ok()) conn = std::move(why);
  socket.close();
  link.closePollFd();
}

void Client::Impl::writeSome() {
  if (link.inUse()) return writeRing();
  if (!conn.ok()) return;
  if (Status st = socket.write(out); !st) {
    // A daemon that closed the connection may have said why first (an
    // ERROR such as shutting_down): that is the reason, not the write.
    readSome();
    lose(std::move(st));
  }
}

void Client::Impl::readSome() {
  if (link.inUse()) return readRing();
  readSocket(in);
}

void Client::Impl::readSocket(ByteBuffer& into) {
  while (conn.ok()) {
    Result<size_t> n = socket.read(into, kReadChunk);
    if (!n) return lose(n.status());
    if (*n == 0) return;
    parseInput(into);
  }
}

// Shared memory: the frames into the ring to the daemon, as far as it has
// room (the rest waits in `out`, like bytes a full socket did not take).
void Client::Impl::writeRing() {
  if (!conn.ok()) return;
  if (Status st = link.write(out); !st) lose(std::move(st));
}

void Client::Impl::readRing() {
  while (conn.ok()) {
    Result<size_t> got = link.read(in, kReadChunk);
    if (!got) return lose(got.status());
    if (*got != 0) {
      parseInput(in);
    } else if (!link.deliveryWaiting() || !takeDeliveryBlock()) {
      return;
    }
  }
}

bool Client::Impl::takeDeliveryBlock() {
  if (view.ready()) return false;  // a view waits to be taken first: this comes after it
  parseInput(in);                  // the frames read before it come first
  if (!conn.ok() || view.ready()) return false;
  Result<proto::Frame> deliver = link.delivery(in.readable(), maxBody);
  if (!deliver) {
    lose(deliver.status());
    return false;
  }
  if (view.wanted() && inbox.empty()) {
    Result<ShmChannel::FrameHold> hold = link.holdDelivery();
    if (!hold) {
      lose(hold.status());
      return false;
    }
    view.readyInBlock(*hold, *deliver);
    return false;
  }
  handleFrame(*deliver);  // copied into the inbox
  if (Status st = link.consumeDelivery(); !st) {
    lose(std::move(st));
    return false;
  }
  return true;
}

bool Client::Impl::allWritten() {
  if (!out.empty()) return false;
  if (link.inUse()) readSocket(sockIn);
  return conn.ok();
}

void Client::Impl::pump() {
  parseInput(in);  // frames left behind an in-place view
  if (link.inUse()) return pumpRings();
  reportConsumed();
  writeSome();
  readSome();
}

// What processIo(), tryReceive() and pollCompletion() do with shared
// memory: after a wake-up, reset the doorbell and look at the socket (a
// closing ERROR, or its end); move the frames; then leave the daemon told
// to ring, so that an application polling fd() is woken by what comes next
// — or, when records keep arriving, leave fd() readable.
void Client::Impl::pumpRings() {
  link.batchServed();
  const bool wasArmed = link.armed();
  Result<bool> rung = link.disarm();
  if (!rung) return lose(rung.status());
  reportConsumed();
  writeRing();
  const uint64_t before = link.counters().recordsRead;
  readRing();
  // Woken, but not by the doorbell and with nothing in the ring: the socket
  // (a closing ERROR, or its end) — or a spurious call, for one recv.
  if (wasArmed && !*rung && link.counters().recordsRead == before) {
    if (Status st = link.resetDoorbell(); !st) return lose(std::move(st));
    readSocket(sockIn);
  }
  if (idle != IdleStrategy::sleep) lookAtSocketNowAndThen(Clock::now());
  settleIfSleeping();
}

// Before the application polls fd(): what is queued goes out, and the
// daemon is asked to ring — unless records came meanwhile (then the word is
// taken back: nobody sleeps).
bool Client::Impl::prepareToPoll() {
  if (!link.inUse() || !conn.ok()) return true;
  if (!inbox.empty() || !completions.empty()) return false;
  if (link.armed()) {
    if (Result<bool> rung = link.disarm(); !rung) lose(rung.status());
  }
  const uint64_t before = link.counters().recordsRead;
  writeRing();
  readRing();
  if (!conn.ok()) return false;
  if (link.counters().recordsRead == before && link.armForSleep(!out.empty())) return true;
  if (Result<bool> rung = link.disarm(); !rung) lose(rung.status());
  return false;
}

// The rings are worked: leave the daemon told to ring when anything comes
// (or room appears), so that an application polling fd() wakes for it — or,
// when records keep arriving, leave fd() readable.
void Client::Impl::settleRings() {
  for (int round = 0; round < 4 && conn.ok(); ++round) {
    if (link.armForSleep(!out.empty())) return;
    Result<bool> rung = link.disarm();
    if (!rung) return lose(rung.status());
    writeRing();
    readRing();
  }
  if (!conn.ok()) return;
  if (Status st = link.wakeSelf(); !st) lose(std::move(st));
}

void Client::Impl::settleIfSleeping() {
  if (idle == IdleStrategy::sleep) settleRings();
}

void Client::Impl::lookAtSocketNowAndThen(Clock::time_point now) {
  if (now < nextSocketLook) return;
  nextSocketLook = now + kSocketLook;
  readSocket(sockIn);
}

// Waits up to `ms` for the daemon's doorbell (records, or room it released)
// or its socket (a closing ERROR, or the end) — after telling the daemon,
// through the rings, that it sleeps.
void Client::Impl::sleepOnRing(int ms) {
  if (!link.armForSleep(!out.empty())) return;  // something arrived meanwhile
  Result<bool> socketReadable = socket.pollWith(link.wakeFd(), ms);
  if (!socketReadable) return lose(socketReadable.status());
  if (Result<bool> rung = link.disarm(); !rung) return lose(rung.status());
  if (*socketReadable) readSocket(sockIn);
}

void Client::Impl::offerSharedMemory(const ConnectOptions& opts) {
  if (!link.offer(opts, out)) return;  // no shared memory here: the socket it is
  Result<size_t> sent = socket.sendWithFds(link.fdsToPass(), out.readable());
  if (!sent) {
    link.withdraw();
    return lose(sent.status());
  }
  out.consume(*sent);
}

// SHM_ACCEPT: every later frame goes through the rings; fd() becomes an
// epoll set of the doorbell and the socket.
void Client::Impl::startSharedMemory() {
  if (Status st = link.start(socket.fd()); !st) lose(std::move(st));
}

}  // namespace rdmamsg
