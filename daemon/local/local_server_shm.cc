// LocalServer: a client's shared-memory channel — the SHM_OFFER that sets
// it up and what it changes in flow control (see local_server.h,
// common/shm_channel.h).
#include <memory>
#include <string>
#include <vector>

#include "daemon/local/local_server.h"
#include "daemon/local/log.h"
#include "daemon/local/session.h"

namespace rdmamsg::local {

// The client's shared-memory channel: attached and accepted, or refused with
// an ERROR in reply to SHM_OFFER — the client then goes on over the socket.
void LocalServer::onShmOffer(Session& s, const proto::Frame& f) {
  std::vector<UniqueFd> fds = s.takePassedFds();
  s.closeOfferWindow();
  auto refuse = [&](const Status& why) {
    localLog().info("{}: shared memory refused: {}", s.name(), why.message());
    proto::encodeError(s.outputBuffer(), 0, why.code(),
                       static_cast<uint8_t>(proto::FrameKind::shm_offer), why.message());
    markDirty(s);
  };
  if (!config_.sharedMemory)
    return refuse(Status(Errc::bad_request, "shared memory is off on this daemon"));
  if (f.maxMessageSize < shm_ring::kMinVersion || f.maxMessageSize > shm_ring::kVersion)
    return refuse(Status(Errc::protocol_error, "shared-memory ring version " +
                                                   std::to_string(f.maxMessageSize) +
                                                   " is not one of this daemon's (" +
                                                   std::to_string(shm_ring::kMinVersion) + ".." +
                                                   std::to_string(shm_ring::kVersion) + ")"));
  if (fds.size() != shm_channel::kFdCount)
    return refuse(Status(Errc::protocol_error, "SHM_OFFER came with " + std::to_string(fds.size()) +
                                                   " descriptors instead of " +
                                                   std::to_string(shm_channel::kFdCount)));
  Result<ShmChannel> channel =
      ShmChannel::attach({std::move(fds[0]), std::move(fds[1]), std::move(fds[2])},
                         f.toDaemonCapacity, f.toClientCapacity);
  if (!channel) return refuse(channel.status());
  // SHM_ACCEPT is the socket's last frame: written now, before the switch.
  proto::encodeShmAccept(s.outputBuffer());
  if (s.flush() != Session::FlushResult::drained)
    return beginClose(s, Status(), "the control socket did not take SHM_ACCEPT");
  s.useSharedMemory(std::make_unique<ShmChannel>(std::move(channel.value())));
  if (!spinner_)
    spinner_ = std::make_unique<loop::Spinner>(
        loop_, loop::SpinHooks{[this] { return pollRings(); }, [this] { return armRings(); },
                               [this] { disarmRings(); }});
  localLog().debug("{}: shared memory: rings of {} and {} bytes, a payload area of {}", s.name(),
                   f.toDaemonCapacity, f.toClientCapacity, s.sharedMemory()->payloadCapacity());
}

// A SEND the client wrote as one frame record: handled like any frame, its
// payload (when large) posted from the client's ring while the record is
// held (Session::takeFrameRecord).
bool LocalServer::handleFrameRecord(Session& s) {
  Session::FrameRecord rec = s.takeFrameRecord();
  if (rec.error != nullptr) {
    protocolError(s, rec.error);
    return false;
  }
  inPlace_ = rec.held;
  handleFrame(s, rec.frame);
  inPlace_ = nullptr;
  if (rec.held != nullptr) rec.held->drop();
  s.readAfterFrameRecord();
  return true;
}

// A spinning loop's hooks (loop/spin.h): the rings are polled in place, and
// every session is asked to be rung only right before the loop sleeps.
bool LocalServer::pollRings() {
  bool worked = false;
  for (auto& [id, s] : sessions_)
    worked = s->pollRing() || worked;
  return worked;
}

bool LocalServer::armRings() {
  for (auto& [id, s] : sessions_)
    if (!s->armForSleep()) return false;  // disarmRings() takes back the others
  return true;
}

void LocalServer::disarmRings() {
  for (auto& [id, s] : sessions_)
    s->disarmAfterSleep();
}

size_t LocalServer::holdSlack(SessionId id) const {
  constexpr size_t kLibraryBuffer = size_t{4} << 20;
  constexpr size_t kSocketBuffer = size_t{4} << 20;  // more than the kernel's default
  const Session* s = find(id);
  const ShmChannel* shm = s == nullptr ? nullptr : s->sharedMemory();
  // Over shared memory: the ring, and the blocks of the payload area its
  // records name (all published before the daemon reads the first).
  const size_t transport =
      shm != nullptr ? shm->toDaemonCapacity() + shm->payloadCapacity() : kSocketBuffer;
  return kLibraryBuffer + transport + 2 * Session::kReadBudget;
}

}  // namespace rdmamsg::local
