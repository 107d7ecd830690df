// librdmamsg: receiveView() — a message read in place, without copying its
// payload out of the client's input buffer (see include/rdmamsg/client.h).
//
// The input buffer `in` holds frames as the library read them (from the
// socket, or copied out of the ring from the daemon). receive() decodes
// every DELIVER into a queued Message (a copy); receiveView() instead asks
// parseInput() to stop at the next DELIVER at the front of `in` and hands
// that frame out where it lies: consumed from `in`, which is pinned until
// release() (common/byte_buffer.h) — reading goes on meanwhile, and when
// `in` needs room the unread bytes move to its spare storage, never the
// viewed ones. The frames behind the view stay in `in` unparsed: the next
// receiveView() views the next DELIVER in place again, and any other call
// that reads parses them first (a DELIVER among them is queued, a copy).
//
// A message already queued (read by processIo(), waitCompletion(), ...)
// is viewed in a private copy (`viewCopy`), in order.
//
// Over shared memory, a large DELIVER comes in a block of the delivery
// area (common/shm_channel.h): a view shows it in the block, held — the
// ring goes on — until release() gives the block back to the daemon.
#include "client/client_impl.h"

namespace rdmamsg {

// Makes the next message, if one was read, available to a view: a DELIVER
// at the front of `in` is found, not queued.
void Client::Impl::prepareView() {
  if (viewReady || !inbox.empty()) return;
  wantView = true;
  parseInput(in);
}

void Client::Impl::takeView(MessageView& v) {
  if (viewBlock) {
    takeFromBlock(v);
  } else if (inbox.empty()) {
    takeInPlace(v);
  } else {
    takeCopied(v);
  }
  viewReady = false;
  v.handle = ++lastHandle;
  viewHandle = v.handle;
}

void Client::Impl::takeInPlace(MessageView& v) {
  const proto::DecodeResult res = proto::decodeFrame(in.readable(), maxBody);
  const proto::Frame& f = res.frame;  // decoded before, from the same bytes: a DELIVER
  v.srcNode = f.node;
  v.srcService = f.service;
  v.service = f.otherService;
  v.payload = f.payload;
  v.inPlace = true;
  in.pin();  // before consume(), which would reuse an emptied buffer from its start
  in.consume(res.consumed);
}

// A DELIVER in the delivery area, held until release(): decoded and
// checked once, when it was found (takeDeliveryBlock()); the daemon does
// not write into a block it placed until the block is given back.
void Client::Impl::takeFromBlock(MessageView& v) {
  const proto::Frame& f = viewBlockFrame;
  v.srcNode = f.node;
  v.srcService = f.service;
  v.service = f.otherService;
  v.payload = f.payload;
  v.inPlace = true;
}

void Client::Impl::takeCopied(MessageView& v) {
  Message& first = inbox.front();
  std::swap(viewCopy, first);  // the slot keeps viewCopy's old buffers for reuse
  inbox.recycleFront();
  v.srcNode = viewCopy.srcNode;
  v.srcService = viewCopy.srcService;
  v.service = viewCopy.service;
  v.payload = viewCopy.payload;
  v.inPlace = false;
}

bool Client::tryReceiveView(MessageView& out) {
  Impl& im = *impl_;
  if (im.viewHandle != 0) return false;  // a view is held: release it first
  im.prepareView();
  if (!im.viewAvailable() && im.conn.ok()) im.pump();
  im.wantView = false;
  if (!im.viewAvailable()) return false;
  im.takeView(out);
  return true;
}

Status Client::receiveView(MessageView& out, std::chrono::milliseconds timeout) {
  Impl& im = *impl_;
  if (im.viewHandle != 0) return detail::viewHeldError();
  im.prepareView();
  Status st = im.waitForView(timeout);
  im.wantView = false;
  if (!st.ok() && !im.viewAvailable()) return st;
  im.takeView(out);
  return {};
}

Status Client::release(MessageView& view) {
  Impl& im = *impl_;
  if (view.handle == 0 || view.handle != im.viewHandle) {
    return Status(Errc::bad_request,
                  "release: the MessageView is not held (released already, or never received)");
  }
  im.viewHandle = 0;
  if (im.viewBlock) {
    // The block is the daemon's again (whatever became of the connection).
    (void)im.shm->releaseHeld(*std::exchange(im.viewBlock, std::nullopt));
  } else {
    im.in.unpin();
  }
  view = MessageView{};
  im.noteTaken();
  return {};
}

}  // namespace rdmamsg
