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
// is viewed in a private copy, in order.
//
// Over shared memory, a large DELIVER comes in a block of the delivery
// area (common/shm_channel.h): a view shows it in the block, held — the
// ring goes on — until release() gives the block back to the daemon.
//
// Where the held view lies is the ViewSlot's (view_slot.h); this file is
// the API and the finding.
#include "client/client_wait.h"

namespace rdmamsg {

// Makes the next message, if one was read, available to a view: a DELIVER
// at the front of `in` is found, not queued.
void Client::Impl::prepareView() {
  if (viewAvailable()) return;
  view.want(true);
  parseInput(in);
}

Status Client::Impl::waitForView(std::chrono::milliseconds timeout) {
  return waitFor([this] { return viewAvailable(); }, timeout);
}

void Client::Impl::takeView(MessageView& v) {
  view.take(v, ++lastHandle, in, maxBody, inbox);
}

bool Client::tryReceiveView(MessageView& out) {
  Impl& im = *impl_;
  if (im.view.held()) return false;  // a view is held: release it first
  im.prepareView();
  if (!im.viewAvailable() && im.conn.ok()) im.pump();
  im.view.want(false);
  if (!im.viewAvailable()) return false;
  im.takeView(out);
  return true;
}

Status Client::receiveView(MessageView& out, std::chrono::milliseconds timeout) {
  Impl& im = *impl_;
  if (im.view.held()) return detail::viewHeldError();
  im.prepareView();
  Status st = im.waitForView(timeout);
  im.view.want(false);
  if (!st.ok() && !im.viewAvailable()) return st;
  im.takeView(out);
  return {};
}

Status Client::release(MessageView& view) {
  Impl& im = *impl_;
  if (!im.view.holds(view)) {
    return Status(Errc::bad_request,
                  "release: the MessageView is not held (released already, or never received)");
  }
  // A block is the daemon's again (whatever became of the connection).
  if (std::optional<ShmChannel::FrameHold> block = im.view.release(view, im.in))
    (void)im.link.releaseDelivery(*block);
  im.inbox.noteTaken();
  im.afterTaken();
  return {};
}

}  // namespace rdmamsg
