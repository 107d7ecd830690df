// ReceiveQueue: received messages in reused slots, and the taken count.
#include "client/receive_queue.h"

#include <utility>

namespace rdmamsg::client {

Message& ReceiveQueue::nextSlot() {
  Message& m = messages_.pushSlot();  // a reused slot: names of a stream are already there
  m.subject.clear();
  m.replyTo.clear();
  m.subscription = 0;
  m.requestId = 0;
  return m;
}

void ReceiveQueue::push(const proto::Frame& deliver) {
  Message& m = nextSlot();
  assignIfChanged(m.srcNode, deliver.node);
  assignIfChanged(m.srcService, deliver.service);
  assignIfChanged(m.service, deliver.otherService);
  m.payload.assign(deliver.payload.begin(), deliver.payload.end());
}

void ReceiveQueue::pushMsg(const proto::Frame& msg) {
  Message& m = nextSlot();
  assignIfChanged(m.srcNode, msg.node);
  m.srcService.clear();
  m.service.clear();
  m.subject.assign(msg.subject);
  m.replyTo.assign(msg.replyTo);
  m.subscription = msg.msgId;
  m.payload.assign(msg.payload.begin(), msg.payload.end());
}

void ReceiveQueue::pushReply(const proto::Frame& reply) {
  const bool keep = awaited_ != 0 && reply.msgId == awaited_ && !kept_;
  Message& m = keep ? kept_.emplace() : nextSlot();
  assignIfChanged(m.srcNode, reply.node);
  m.srcService.clear();
  m.service.clear();
  m.requestId = reply.msgId;
  m.payload.assign(reply.payload.begin(), reply.payload.end());
  // No view is held while a reply is awaited: everything read before it
  // is taken, waits in a gap, or is queued.
  if (keep) keptAfter_ = taken_ + gaps_.size() + messages_.size();
}

void ReceiveQueue::awaitReply(uint64_t requestId) {
  awaited_ = requestId;
  kept_.reset();
}

void ReceiveQueue::takeReply(Message& m) {
  std::swap(m, *kept_);
  kept_.reset();
  awaited_ = 0;
  if (keptAfter_ == taken_)
    noteTaken();
  else
    gaps_.push_back(keptAfter_);
}

void ReceiveQueue::takeInto(Message& m) {
  Message& first = messages_.front();
  assignIfChanged(m.srcNode, first.srcNode);
  assignIfChanged(m.srcService, first.srcService);
  assignIfChanged(m.service, first.service);
  m.subject.swap(first.subject);
  m.replyTo.swap(first.replyTo);
  m.subscription = first.subscription;
  m.requestId = first.requestId;
  m.payload.swap(first.payload);
  messages_.recycleFront();
  noteTaken();
}

void ReceiveQueue::swapFront(Message& m) {
  std::swap(m, messages_.front());  // the slot keeps m's old buffers for reuse
  messages_.recycleFront();
}

void ReceiveQueue::noteTaken() {
  ++taken_;
  while (!gaps_.empty() && gaps_.front() == taken_) {  // replies taken out of turn
    gaps_.pop_front();
    ++taken_;
  }
  if (confirmOnReceive_) takenMark_ = taken_;
}

void ReceiveQueue::setConfirmOnReceive(bool on) {
  confirmOnReceive_ = on;
  if (on) takenMark_ = taken_;
}

std::optional<uint64_t> ReceiveQueue::nextReport() {
  if (takenMark_ == reported_) return std::nullopt;
  reported_ = takenMark_;
  return reported_;
}

}  // namespace rdmamsg::client
