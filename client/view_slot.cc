// ViewSlot: where the held view lies, and how it is handed out and ended.
#include "client/view_slot.h"

#include <utility>

namespace rdmamsg::client {

void ViewSlot::readyInBlock(const FrameHold& hold, const proto::Frame& deliver) {
  block_ = hold;
  blockFrame_ = deliver;
  ready_ = true;
}

void ViewSlot::take(MessageView& v, uint64_t handle, ByteBuffer& in, uint32_t maxBody,
                    ReceiveQueue& queue) {
  v = MessageView{};
  if (block_) {
    takeFromBlock(v);
  } else if (queue.empty()) {
    takeInPlace(v, in, maxBody);
  } else {
    takeCopied(v, queue);
  }
  ready_ = false;
  v.handle = handle;
  handle_ = handle;
}

void ViewSlot::takeInPlace(MessageView& v, ByteBuffer& in, uint32_t maxBody) {
  // Decoded before, from the same bytes: a DELIVER.
  const Result<proto::Decoded> res = proto::decodeFrame(in.readable(), maxBody);
  const proto::Frame& f = res->frame;
  v.srcNode = f.node;
  v.srcService = f.service;
  v.service = f.otherService;
  v.payload = f.payload;
  v.inPlace = true;
  in.pin();  // before consume(), which would reuse an emptied buffer from its start
  in.consume(res->consumed);
}

// Decoded and checked once, when it was found; the daemon does not write
// into a block it placed until the block is given back.
void ViewSlot::takeFromBlock(MessageView& v) const {
  const proto::Frame& f = blockFrame_;
  v.srcNode = f.node;
  v.srcService = f.service;
  v.service = f.otherService;
  v.payload = f.payload;
  v.inPlace = true;
}

void ViewSlot::takeCopied(MessageView& v, ReceiveQueue& queue) {
  queue.swapFront(copy_);
  v.srcNode = copy_.srcNode;
  v.srcService = copy_.srcService;
  v.service = copy_.service;
  v.payload = copy_.payload;
  v.subject = copy_.subject;
  v.replyTo = copy_.replyTo;
  v.subscription = copy_.subscription;
  v.requestId = copy_.requestId;
  v.inPlace = false;
}

std::optional<ViewSlot::FrameHold> ViewSlot::release(MessageView& v, ByteBuffer& in) {
  handle_ = 0;
  v = MessageView{};
  if (block_) return std::exchange(block_, std::nullopt);
  in.unpin();
  return std::nullopt;
}

}  // namespace rdmamsg::client
