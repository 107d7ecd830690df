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
// Over shared memory a large DELIVER the daemon wrote whole into one
// record of the ring from it is viewed in the ring itself, not even copied
// into `in`: the record is held (the daemon does not reuse its room) until
// release(). readRing() leaves such a record where it lies while a view is
// wanted and nothing comes before it.
//
// A message already queued (read by processIo(), waitCompletion(), ...)
// is viewed in a private copy (`viewCopy`), in order.
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
  if (ringViewReady) {
    takeFromRing(v);
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

bool Client::Impl::findRingView() {
  Result<std::span<const std::byte>> rec = shm->peekRecord();
  if (!rec) {
    lose(rec.status());
    return false;
  }
  if (rec->size() < kMinRingView) return false;
  const proto::DecodeResult res = proto::decodeFrame(*rec, maxBody);
  ringViewReady = res.outcome == proto::DecodeOutcome::frame &&
                  res.frame.kind == proto::FrameKind::deliver && res.consumed == rec->size();
  return ringViewReady;
}

// The DELIVER findRingView() found, viewed where the daemon wrote it; the
// ring's room behind it comes back at release().
void Client::Impl::takeFromRing(MessageView& v) {
  ringViewReady = false;
  Result<std::span<const std::byte>> rec = shm->peekRecord();
  const proto::DecodeResult res = proto::decodeFrame(rec ? *rec : std::span<const std::byte>(),
                                                     maxBody);  // as decoded before
  Result<uint64_t> position = shm->holdRecord();
  if (!position) return lose(position.status());
  const proto::Frame& f = res.frame;
  v.srcNode = f.node;
  v.srcService = f.service;
  v.service = f.otherService;
  v.payload = f.payload;
  v.inPlace = true;
  ringViewHeld = true;
  ringViewPosition = *position;
}

void Client::Impl::takeCopied(MessageView& v) {
  Message& first = inbox.front();
  std::swap(viewCopy, first);  // the slot keeps viewCopy's old buffers for reuse
  inbox.popFront();
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
  if (im.ringViewHeld) {
    im.ringViewHeld = false;
    if (Status st = im.shm->releaseHeld({im.ringViewPosition}); !st) im.lose(st);
  } else {
    im.in.unpin();
  }
  view = MessageView{};
  im.noteTaken();
  return {};
}

}  // namespace rdmamsg
