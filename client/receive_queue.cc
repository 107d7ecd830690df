// ReceiveQueue: received messages in reused slots, and the taken count.
#include "client/receive_queue.h"

#include <utility>

namespace rdmamsg::client {

void ReceiveQueue::push(const proto::Frame& deliver) {
  Message& m = messages_.pushSlot();  // a reused slot: names of a stream are already there
  assignIfChanged(m.srcNode, deliver.node);
  assignIfChanged(m.srcService, deliver.service);
  assignIfChanged(m.service, deliver.otherService);
  m.payload.assign(deliver.payload.begin(), deliver.payload.end());
}

void ReceiveQueue::takeInto(Message& m) {
  Message& first = messages_.front();
  assignIfChanged(m.srcNode, first.srcNode);
  assignIfChanged(m.srcService, first.srcService);
  assignIfChanged(m.service, first.service);
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
