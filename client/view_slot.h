// ViewSlot: the one message receiveView() holds (receive_view.cc) and where
// it lies, until release():
//  - in place in the input buffer: a DELIVER found at the front of `in`
//    (while a view is wanted, parsing stops there instead of queueing it),
//    consumed from `in`, which is pinned so that reading goes on without
//    moving the viewed bytes (common/byte_buffer.h);
//  - in a block of the delivery area the daemon placed it in (the block is
//    held: the daemon does not write into it until it is given back);
//  - in a private copy, for a message the library had already queued.
// The frames behind an in-place view stay in `in` unparsed.
#pragma once

#include <cstdint>
#include <optional>

#include "client/receive_queue.h"
#include "common/byte_buffer.h"
#include "common/local_protocol.h"
#include "common/shm_channel.h"
#include "rdmamsg/client.h"

namespace rdmamsg::client {

class ViewSlot {
 public:
  using FrameHold = ShmChannel::FrameHold;

  bool held() const { return handle_ != 0; }
  bool holds(const MessageView& v) const { return v.handle != 0 && v.handle == handle_; }

  // While receiveView() looks for a message: the next DELIVER is to be
  // found where it lies, not queued.
  void want(bool on) { wanted_ = on; }
  bool wanted() const { return wanted_; }
  // A DELIVER was found for the view: at the front of `in`, or in a block.
  bool ready() const { return ready_; }
  void readyInInput() { ready_ = true; }
  void readyInBlock(const FrameHold& hold, const proto::Frame& deliver);

  // Hands out the next message as `v`, named `handle` (not 0): the one
  // found (ready()), or, when `queue` is not empty, its oldest (a copy).
  void take(MessageView& v, uint64_t handle, ByteBuffer& in, uint32_t maxBody, ReceiveQueue& queue);
  // Ends the view held and resets `v`: returns the block to give back to
  // the daemon when it lay in one; otherwise `in` is unpinned.
  std::optional<FrameHold> release(MessageView& v, ByteBuffer& in);

 private:
  void takeInPlace(MessageView& v, ByteBuffer& in, uint32_t maxBody);
  void takeFromBlock(MessageView& v) const;
  void takeCopied(MessageView& v, ReceiveQueue& queue);

  uint64_t handle_ = 0;  // the held view's, 0: none held
  bool wanted_ = false;
  bool ready_ = false;
  std::optional<FrameHold> block_;  // the ready or held view's block
  proto::Frame blockFrame_;         // its DELIVER, decoded (views into the block)
  Message copy_;                    // a queued message viewed (its buffers reused)
};

}  // namespace rdmamsg::client
