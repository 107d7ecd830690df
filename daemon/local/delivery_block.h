// DeliveryBlock: a block of a shared-memory client's delivery area
// (common/shm_channel.h) that one DELIVER frame is written into — by
// Session::writeInArea at once, or fragment by fragment as the message
// comes from a peer (a DeliveryRoom: daemon/delivery_room.h). Once its
// payload record is in the client's ring (Session::publishBlock) the block
// is the client's until it gives it back; before that, destroying it gives
// the block back to the area.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <utility>

#include "common/shm_channel.h"
#include "daemon/delivery_room.h"
#include "daemon/local/local_handler.h"

namespace rdmamsg::local {

class DeliveryBlock final : public DeliveryRoom {
 public:
  using Block = shm_payload::PayloadAllocator::Block;
  DeliveryBlock(SessionId session, std::shared_ptr<ShmChannel> channel, const Block& block,
                size_t payloadSize)
      : session_(session), channel_(std::move(channel)), block_(block), payload_(payloadSize) {}
  ~DeliveryBlock() override {
    if (!published_) channel_->freeBlock(block_);
  }
  DeliveryBlock(const DeliveryBlock&) = delete;
  DeliveryBlock& operator=(const DeliveryBlock&) = delete;

  // The payload's place: the end of the frame.
  std::span<std::byte> payload() override { return block_.bytes.last(payload_); }
  std::span<std::byte> frame() const { return block_.bytes; }
  SessionId session() const { return session_; }
  const ShmChannel* channel() const { return channel_.get(); }
  const Block& block() const { return block_; }
  void published() { published_ = true; }

 private:
  SessionId session_;
  std::shared_ptr<ShmChannel> channel_;  // keeps the mapping while the block is written
  Block block_;
  size_t payload_;
  bool published_ = false;
};

}  // namespace rdmamsg::local
