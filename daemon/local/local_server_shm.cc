// LocalServer: a client's shared-memory link — the SHM_OFFER that sets it
// up, the SENDs it carries as frame records, and what it changes in flow
// control (see local_server.h, shm_link.h, common/shm_channel.h).
#include <memory>
#include <string>
#include <vector>

#include "daemon/local/local_server.h"
#include "daemon/local/log.h"
#include "daemon/local/session.h"

namespace rdmamsg::local {
namespace {

// Why a client's SHM_OFFER cannot be taken (ok: it can).
Status checkOffer(const proto::Frame& f, size_t fdCount, bool enabled) {
  if (!enabled) return Status(Errc::bad_request, "shared memory is off on this daemon");
  if (f.ringVersion < shm_ring::kMinVersion || f.ringVersion > shm_ring::kVersion)
    return Status(Errc::protocol_error,
                  "shared-memory ring version " + std::to_string(f.ringVersion) +
                      " is not one of this daemon's (" + std::to_string(shm_ring::kMinVersion) +
                      ".." + std::to_string(shm_ring::kVersion) + ")");
  if (fdCount != shm_channel::kFdCount)
    return Status(Errc::protocol_error, "SHM_OFFER came with " + std::to_string(fdCount) +
                                            " descriptors instead of " +
                                            std::to_string(shm_channel::kFdCount));
  return Status();
}

}  // namespace

// The client's shared-memory channel: attached and accepted, or refused with
// an ERROR in reply to SHM_OFFER — the client then goes on over the socket.
void LocalServer::onShmOffer(Client& c, const proto::Frame& f) {
  Session& s = *c.session;
  std::vector<UniqueFd> fds = s.takePassedFds();
  auto refuse = [&](const Status& why) {
    s.stayOnSocket();
    localLog().info("{}: shared memory refused: {}", s.name(), why.message());
    proto::encodeError(s.outputBuffer(), 0, why.code(),
                       static_cast<uint8_t>(proto::FrameKind::shm_offer), why.message());
    markDirty(c);
  };
  if (Status st = checkOffer(f, fds.size(), config_.sharedMemory); !st) return refuse(st);
  Result<ShmChannel> channel =
      ShmChannel::attach({std::move(fds[0]), std::move(fds[1]), std::move(fds[2])},
                         f.toDaemonCapacity, f.toClientCapacity);
  if (!channel) return refuse(channel.status());
  // SHM_ACCEPT is the socket's last frame: written now, before the switch.
  proto::encodeShmAccept(s.outputBuffer());
  if (s.flush() != FlushResult::drained)
    return beginClose(c, Status(), "the control socket did not take SHM_ACCEPT");
  s.useSharedMemory(std::make_unique<ShmChannel>(std::move(channel.value())));
  if (!spinner_)
    spinner_ = std::make_unique<loop::Spinner>(
        loop_, loop::SpinHooks{[this] { return pollRings(); }, [this] { return armRings(); },
                               [this] { disarmRings(); }});
  localLog().debug("{}: shared memory: rings of {} and {} bytes, a payload area of {}", s.name(),
                   f.toDaemonCapacity, f.toClientCapacity, s.link()->channel().payloadCapacity());
}

// A SEND the client wrote as one frame record: handled like any frame, its
// payload (when large) handed on held where it lies (ShmLink::takeFrameRecord).
bool LocalServer::handleFrameRecord(Client& c) {
  Session& s = *c.session;
  ShmLink::FrameRecord rec = s.link()->takeFrameRecord(s.maxBody());
  if (!rec.error.ok()) {
    protocolError(c, rec.error);
    return false;
  }
  // The payload stays held (valid) until the frame is handled; whoever
  // keeps it longer shares the handle.
  handleFrame(c, rec.frame, rec.payload ? &rec.payload : nullptr);
  s.readAfterFrameRecord();
  return true;
}

// A spinning loop's hooks (loop/spin.h): the rings are polled in place, and
// every session is asked to be rung only right before the loop sleeps.
bool LocalServer::pollRings() {
  bool worked = false;
  for (auto& [id, c] : clients_)
    worked = c.session->pollRing() || worked;
  return worked;
}

bool LocalServer::armRings() {
  for (auto& [id, c] : clients_)
    if (!c.session->armForSleep()) return false;  // disarmRings() takes back the others
  return true;
}

void LocalServer::disarmRings() {
  for (auto& [id, c] : clients_)
    c.session->disarmAfterSleep();
}

size_t LocalServer::holdSlack(SessionId id) const {
  constexpr size_t kLibraryBuffer = size_t{4} << 20;
  constexpr size_t kSocketBuffer = size_t{4} << 20;  // more than the kernel's default
  const Client* c = find(id);
  const ShmLink* link = c == nullptr ? nullptr : c->session->link();
  // Over shared memory: the ring, and the blocks of the payload area its
  // records name (all published before the daemon reads the first).
  const size_t transport = link != nullptr ? link->holdSlack() : kSocketBuffer;
  return kLibraryBuffer + transport + 2 * Session::kReadBudget;
}

}  // namespace rdmamsg::local
