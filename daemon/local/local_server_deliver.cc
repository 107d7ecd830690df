// LocalServer: deliveries to a listener — written once, into a block of its
// delivery area (a large one over shared memory), into its ring, or into
// its output buffer (see local_server.h, common/shm_channel.h).
#include <memory>

#include "daemon/local/local_server.h"
#include "daemon/local/session.h"
#include "daemon/loop/counters.h"

namespace rdmamsg::local {

bool LocalServer::deliver(SessionId id, std::string_view srcNode, std::string_view srcService,
                          std::string_view toService, std::span<const std::byte> payload,
                          const Receipt& receipt, DeliveryRoom* room) {
  Client* c = find(id);
  auto* block = dynamic_cast<DeliveryBlock*>(room);
  if (c == nullptr || (block != nullptr && block->session() != id)) {
    // The listener went while the message came (its block is another
    // client's memory: nothing is copied from there to this one).
    if (room != nullptr) loop::copies().reassembly += payload.size();
    return false;
  }
  Session* s = c->session.get();
  const size_t bytes = proto::deliverFrameSize(srcNode, srcService, toService, payload.size());
  auto fill = [&](std::span<std::byte> at) {
    proto::encodeDeliverAt(at, srcNode, srcService, toService, payload);
  };
  // Put together in the listener's own block: only its head is left to write.
  const bool own = block != nullptr && block->frame().size() == bytes;
  if (own) proto::encodeDeliverHeadAt(block->frame(), srcNode, srcService, toService);
  if (own && s->publishBlock(*block)) {
    loop::copies().deliveredInArea += payload.size();
  } else {
    // A room not delivered in was a reassembly buffer after all.
    if (room != nullptr) loop::copies().reassembly += payload.size();
    // Its own block could not go out now: another one would not either.
    if (!own && s->writeInArea(bytes, payload.size(), fill)) {
      loop::copies().deliveredInArea += payload.size();
    } else if (!s->writeInPlace(bytes, fill)) {
      proto::encodeDeliver(s->outputBuffer(), srcNode, srcService, toService, payload);
    }
  }
  loop::copies().deliver += payload.size();
  tracked(*c, receipt, bytes);
  return true;
}

void LocalServer::tracked(Client& c, const Receipt& receipt, size_t frameBytes) {
  c.session->deliveries().track(receipt, frameBytes);
  trackedBytes_ += frameBytes;
  markDirty(c);
}

std::unique_ptr<DeliveryRoom> LocalServer::reserveDelivery(SessionId id, std::string_view srcNode,
                                                           std::string_view srcService,
                                                           std::string_view toService,
                                                           uint64_t payload) {
  Client* c = find(id);
  if (c == nullptr) return nullptr;
  return c->session->reserveBlock(proto::deliverFrameSize(srcNode, srcService, toService, payload),
                                  payload);
}

}  // namespace rdmamsg::local
