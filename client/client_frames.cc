// Client::Impl: the frames read from rdmamsgd, decoded and each handed to
// the part it concerns (see client_impl.h), and what the library tells
// the daemon about the messages the application took (CONSUMED).
#include <algorithm>
#include <string>
#include <utility>

#include "client/client_impl.h"

namespace rdmamsg {

using proto::FrameKind;

void Client::Impl::parseInput(ByteBuffer& from) {
  while (conn.ok()) {
    const Result<proto::Decoded> res = proto::decodeFrame(from.readable(), maxBody);
    if (!res) {
      return lose(Status(Errc::protocol_error, "from rdmamsgd: " + res.status().message()));
    }
    if (res->kind == proto::Decoded::Kind::need_more) return;
    if (res->kind == proto::Decoded::Kind::other_version) {
      return lose(Status(Errc::protocol_error,
                         "rdmamsgd speaks local protocol version " + std::to_string(res->version) +
                             ", this client " + std::to_string(proto::kProtocolVersion) +
                             ": use a client library and daemon of the same release"));
    }
    // receiveView() reads the next message where it lies.
    if (view.wanted() && res->frame.kind == FrameKind::deliver && &from == &in && inbox.empty()) {
      view.readyInInput();
      return;
    }
    handleFrame(res->frame);
    from.consume(res->consumed);
  }
}

void Client::Impl::handleFrame(const proto::Frame& f) {
  switch (f.kind) {
    case FrameKind::welcome:
      return handleWelcome(f);
    case FrameKind::registered:
      return requests.registered(f.service);
    case FrameKind::deliver:
      return inbox.push(f);
    case FrameKind::ack:
      for (size_t i = 0; i < f.ackRangeCount(); ++i) {
        const proto::AckRange a = f.ackRange(i);
        completions.acked(a.first, a.count);
      }
      return;
    case FrameKind::error:
      return handleError(f);
    case FrameKind::status_reply:
      return requests.statusReplied(f.text);
    case FrameKind::bye:
      return lose(Status(Errc::not_connected, "rdmamsgd said goodbye"));
    case FrameKind::hold:
    case FrameKind::resume:
      return held.set(f.node, f.service, f.kind == FrameKind::hold);
    case FrameKind::shm_accept:
      return handleShmAccept();
    case FrameKind::shm_offer:
    case FrameKind::hello:
    case FrameKind::consumed:
    case FrameKind::reg:
    case FrameKind::unreg:
    case FrameKind::send:
    case FrameKind::status_request:
    case FrameKind::sub:
    case FrameKind::unsub:
    case FrameKind::pub:
    case FrameKind::respond:
      return lose(Status(Errc::protocol_error, "rdmamsgd sent a client frame"));
    case FrameKind::subscribed:
      return handleSubscribed(f.msgId);
    case FrameKind::pub_ack:
      return handlePubAck(f);
    case FrameKind::msg:
      return inbox.pushMsg(f);
    case FrameKind::reply:
      return handleReply(f);
  }
}

void Client::Impl::handleSubscribed(uint64_t subId) {
  if (!subs.answer(subId, Status()))
    lose(Status(Errc::protocol_error,
                "rdmamsgd sent SUBSCRIBED " + std::to_string(subId) + " without a SUB"));
}

void Client::Impl::handlePubAck(const proto::Frame& f) {
  Status outcome = f.errc == Errc::ok ? Status() : Status(f.errc, std::string(f.text));
  completions.published(f.msgId, std::move(outcome), f.matched, f.taken, f.dropped);
}

void Client::Impl::handleReply(const proto::Frame& f) {
  completions.settled();  // the reply is the request's outcome: no completion comes
  inbox.pushReply(f);
}

void Client::Impl::handleWelcome(const proto::Frame& f) {
  nodeName.assign(f.node);
  maxMessage = f.maxMessageSize;
  maxBody = std::max(proto::maxBodyFor(f.maxMessageSize), proto::kDefaultMaxBody);
  welcomed = true;
}

void Client::Impl::handleError(const proto::Frame& f) {
  Status st(f.errc, std::string(f.text));
  if (static_cast<FrameKind>(f.inReplyTo) == FrameKind::sub) {  // msgId: the subscription's
    if (!subs.answer(f.msgId, st)) lose(std::move(st));
    return;
  }
  if (f.msgId != 0) return completions.failed(f.msgId, std::move(st));
  switch (static_cast<FrameKind>(f.inReplyTo)) {
    case FrameKind::shm_offer:  // refused: the socket it is
      if (link.state() != client::ShmLink::State::offered)
        return lose(
            Status(Errc::protocol_error, "rdmamsgd refused a shared-memory offer not made"));
      return link.refuse();
    case FrameKind::reg:
      return requests.registerFailed(std::move(st));
    case FrameKind::status_request:
      return requests.statusFailed(std::move(st));
    default:
      return lose(std::move(st));  // connection-level: the daemon closes
  }
}

void Client::Impl::handleShmAccept() {
  if (link.state() != client::ShmLink::State::offered)
    return lose(Status(Errc::protocol_error, "rdmamsgd sent SHM_ACCEPT unasked"));
  startSharedMemory();
}

void Client::Impl::reportConsumed() {
  if (!conn.ok()) return;
  if (std::optional<uint64_t> taken = inbox.nextReport()) proto::encodeConsumed(out, *taken);
}

void Client::Impl::takeMessage(Message& m) {
  inbox.takeInto(m);
  afterTaken();
}

void Client::Impl::afterTaken() {
  // Everything read is taken: say so now, so the last message of a burst is
  // confirmed at once (one CONSUMED per read at full speed) even if the
  // application does not call the library again for a while.
  if (inbox.confirmOnReceive() && allReadTaken()) {
    reportConsumed();
    writeSome();
  }
}

bool Client::Impl::allReadTaken() const {
  if (!inbox.empty()) return false;
  const Result<proto::Decoded> next = proto::decodeFrame(in.readable(), maxBody);
  return next && next->kind == proto::Decoded::Kind::need_more;
}

}  // namespace rdmamsg
