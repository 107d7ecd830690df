// The sending side of a peer (outbound.h).
#include "daemon/peer/outbound.h"
#include "daemon/peer/outbound_flow.h"

#include "daemon/loop/counters.h"

#include <algorithm>
#include <cstring>
#include <ctime>

namespace rdmamsg::peer {

namespace {

constexpr size_t kMinFragment = 4096;
constexpr size_t kTurnBytes = 256 * 1024;  // what one flow writes before the next has its turn
// Past 8 × send_queue_limit queued over all flows, a flow may queue one
// message more (not a queue's worth): memory stays bounded, and a flow whose
// window reopens still goes.
constexpr size_t kTotalFactor = 8;
// Bytes a drained flow's queue keeps (more is freed at the next tick).
constexpr size_t kIdleQueueCapacity = 64 * 1024;

}  // namespace

Outbound::Outbound(const config::Config& config, const std::string& peerName, uint64_t peerId,
                   PeerEvents& events, std::function<void()> wake)
    : config_(config),
      peerName_(peerName),
      peerId_(peerId),
      events_(events),
      wake_(std::move(wake)) {}

FlowKey Outbound::keyOf(const Flow& f) const {
  return {peerId_, f.number};
}

// Calls f(q, src, payload) for each message queued in `flow`, oldest first:
// its header, its sender's name, and its payload (in the queue, or where
// it lies).
template <typename F>
void Outbound::forEachQueued(const Flow& flow, F&& f) {
  size_t off = 0;
  for (size_t n = 0; n < flow.queuedMessages; n++) {
    Queued q;
    std::memcpy(&q, flow.queue.data() + off, sizeof q);
    const std::byte* src = flow.queue.data() + off + sizeof q;
    off += sizeof q + q.srcLen + (q.inPlace ? 0 : q.length);
    f(q, std::span<const std::byte>(src, q.srcLen),
      std::span<const std::byte>(q.inPlace ? q.at : src + q.srcLen, q.length));
  }
}

Outbound::~Outbound() {
  // Payloads still waiting in place go back to their clients.
  for (auto& [name, f] : flows_) {
    size_t held = 0;
    forEachQueued(*f, [&](const Queued& q, auto, auto) {
      if (q.inPlace) letGo(std::move(f->held[held++]), q.length);
    });
  }
}

void Outbound::holdIn(ExternalArea& area, size_t bytes) {
  area.queued += bytes;
  if (heldIn_[&area]++ == 0) area.addHolder(this);
}

void Outbound::letGo(PayloadHandle p, size_t bytes) {
  ExternalArea& area = p.area();
  area.queued -= bytes;
  if (--heldIn_[&area] == 0) {
    heldIn_.erase(&area);
    area.removeHolder(this);
    std::erase(spillWanted_, &area);
  }
}

void Outbound::spillRequested(ExternalArea& area) {
  if (std::find(spillWanted_.begin(), spillWanted_.end(), &area) == spillWanted_.end())
    spillWanted_.push_back(&area);
  wake_();
}

void Outbound::serveSpills() {
  while (!spillWanted_.empty()) {
    ExternalArea* area = spillWanted_.back();
    spillWanted_.pop_back();
    spill(*area);
  }
}

// Rebuilds each queue with the payloads of `area` copied in.
void Outbound::spill(ExternalArea& area) {
  std::vector<std::pair<PayloadHandle, size_t>> released;
  for (auto& [name, fp] : flows_) {
    Flow& f = *fp;
    ByteBuffer rebuilt;
    Ring<PayloadHandle> kept;
    size_t held = 0;
    const size_t before = released.size();
    forEachQueued(
        f, [&](Queued q, std::span<const std::byte> src, std::span<const std::byte> payload) {
          if (q.inPlace) {
            PayloadHandle& h = f.held[held++];
            if (&h.area() == &area) {
              released.emplace_back(std::move(h), q.length);
              q.inPlace = false;
              q.at = nullptr;
              loop::copies().flowQueue += q.length;
            } else {
              kept.pushBack(std::move(h));
            }
          }
          rebuilt.append(&q, sizeof q);
          rebuilt.append(src);
          if (!q.inPlace) rebuilt.append(payload);
        });
    f.held = std::move(kept);
    if (released.size() != before) f.queue = std::move(rebuilt);
  }
  for (auto& [p, bytes] : released)
    letGo(std::move(p), bytes);
}

void Outbound::reset(uint64_t remoteWindow, uint64_t remoteMaxMessage, bool keepSequence) {
  remoteWindow_ = remoteWindow;
  remoteMaxMessage_ = remoteMaxMessage;
  if (keepSequence) return;
  nextSeq_ = baseSeq_ = keptFrom_ = 1;
  kept_.clear();
  resend_ = {};
  repeatsSettle_ = false;
}

Outbound::Flow& Outbound::flowFor(std::string_view service) {
  if (lastFlow_ != nullptr && lastFlow_->service == service) return *lastFlow_;
  auto it = flows_.find(std::string(service));
  if (it == flows_.end()) {
    auto f = std::make_unique<Flow>();
    f->service = std::string(service);
    f->number = nextFlow_++;
    it = flows_.emplace(f->service, std::move(f)).first;
  }
  lastFlow_ = it->second.get();
  return *lastFlow_;
}

bool Outbound::wouldStart(std::string_view service, uint64_t cost) const {
  auto it = flows_.find(std::string(service));
  return it == flows_.end() || (it->second->queuedMessages == 0 && canStart(*it->second, cost));
}

bool Outbound::canStart(const Flow& f, uint64_t cost) const {
  return f.unconfirmed == 0 || f.unconfirmed + cost <= remoteWindow_;
}

void Outbound::makeReady(Flow& f) {
  if (f.ready || f.queuedMessages == 0) return;
  f.ready = true;
  ready_.push_back(&f);
}

Result<Admitted> Outbound::send(SendRoom* room, uint64_t session, uint64_t msgId,
                                std::string_view src, std::string_view dst,
                                std::span<const std::byte> payload, const PayloadHandle* inPlace) {
  if (remoteMaxMessage_ != 0 && payload.size() > remoteMaxMessage_)
    return Status(Errc::too_large, "message of " + std::to_string(payload.size()) +
                                       " bytes is over the max_message_size of " + peerName_ +
                                       " (" + std::to_string(remoteMaxMessage_) + " bytes)");
  // (Only our pointer is dropped: the caller holds the payload while it is
  // copied.) A message kept for a resume is copied anyway: it goes from there.
  if (room == nullptr || payload.size() < kMinInPlace || retain_) inPlace = nullptr;
  // Posted from where it lies when the link can; else (authenticated
  // batches: the MAC must cover what the NIC reads) copied into the batches
  // when it goes — it may still wait where it lies, one copy, not two.
  const PayloadHandle* post =
      inPlace != nullptr && room->canPostInPlace(inPlace->area()) ? inPlace : nullptr;
  Flow& f = flowFor(dst);
  auto cost = static_cast<uint32_t>(
      std::min<uint64_t>(windowCost(src.size(), dst.size(), payload.size()), UINT32_MAX));
  auto deadline = coarseNow() + config_.timers.messageTimeout;
  uint64_t offset = 0;
  bool started = false;
  // The fast path: nothing before it, window and link room now.
  if (room != nullptr && current_ == nullptr && !resending() && f.queuedMessages == 0 &&
      canStart(f, cost) && room->messageRoom() > 0) {
    uint64_t seq = nextSeq_++;
    inflight_.pushBack({session, msgId, &f, cost, false, false, deadline, sampleTime(seq)});
    if (retain_) keep(seq, src, payload);
    unsettled_++;
    f.unconfirmed += cost;
    if (write(*room, seq, src, dst, payload, offset, started, post)) return Admitted{};
    current_ = &f;
  }
  // A payload in a ring waits where it is only for the link: its window has
  // room for it after the messages queued before it (a started message
  // waits for nothing else). The ring gives nothing back past its oldest
  // record held, so one held for a window — for a listener that may never
  // read — would stall every flow of its client: that one is copied into
  // the queue. So is one that would hold over half of its client's ring;
  // and past half of the ring held the session has what waits copied out
  // (spill()). A block of a payload area pins only itself: it waits in
  // place for whatever it waits for.
  if (inPlace != nullptr && !started && inPlace->area().order() == ExternalArea::Order::inOrder &&
      (!(f.unconfirmed + f.waitingCost + cost <= remoteWindow_ ||
         (f.unconfirmed == 0 && f.waitingCost == 0)) ||
       inPlace->area().queued + payload.size() > inPlace->area().bytes().size() / 2))
    inPlace = nullptr;
  enqueue(f, session, msgId, deadline, src, payload.subspan(offset), started, cost,
          inPlace != nullptr ? inPlace->share() : PayloadHandle());
  if (!started) makeReady(f);
  // Only this flow's senders are held (HOLD of this destination): a full
  // flow never stops another.
  if (f.queuedBytes > config_.buffers.sendQueueLimit ||
      (f.queuedMessages > 1 && totalQueued_ > kTotalFactor * config_.buffers.sendQueueLimit)) {
    f.paused = true;
    return Admitted{keyOf(f)};
  }
  return Admitted{};
}

void Outbound::enqueue(Flow& f, uint64_t session, uint64_t msgId, Clock::time_point deadline,
                       std::string_view src, std::span<const std::byte> rest, bool started,
                       uint32_t cost, PayloadHandle inPlace) {
  Queued q{session,
           msgId,
           deadline,
           0,
           static_cast<uint32_t>(rest.size()),
           cost,
           static_cast<uint8_t>(src.size()),
           started,
           !started,
           static_cast<bool>(inPlace),
           rest.data()};
  if (!started) f.waitingCost += cost;
  f.queue.append(&q, sizeof q);
  f.queue.append(src);
  // Counted whether stored here or waiting in place: the queue's limit
  // (HOLD) bounds both.
  const size_t bytes = sizeof q + src.size() + rest.size();
  if (inPlace) {
    holdIn(inPlace.area(), rest.size());
    f.held.pushBack(std::move(inPlace));
  } else {
    f.queue.append(rest);
    loop::copies().flowQueue += rest.size();
  }
  f.queuedBytes += bytes;
  f.queuedMessages++;
  totalQueued_ += bytes;
}

void Outbound::popFront(Flow& f) {
  Queued q = f.front();
  const size_t bytes = sizeof q + q.srcLen + q.length;
  f.queue.consume(bytes - (q.inPlace ? q.length : 0));
  if (q.waiting) f.waitingCost -= q.cost;
  f.queuedBytes -= bytes;
  f.queuedMessages--;
  totalQueued_ -= bytes;
  if (q.inPlace) {
    PayloadHandle p = std::move(f.held.front());
    f.held.popFront();
    letGo(std::move(p), q.length);
  }
  if (f.paused && (f.queuedBytes <= config_.buffers.sendQueueLimit / 2 || f.queuedMessages == 0)) {
    f.paused = false;
    events_.queueDrained(keyOf(f));
  }
}

void Outbound::releaseIdleQueues() {
  for (auto& [name, f] : flows_)
    if (f->queuedMessages == 0 && f->queue.capacity() > kIdleQueueCapacity) f->queue = ByteBuffer();
}

bool Outbound::write(SendRoom& room, uint64_t seq, std::string_view src, std::string_view dst,
                     std::span<const std::byte> payload, uint64_t& offset, bool& started,
                     const PayloadHandle* inPlace) {
  for (;;) {
    size_t space = room.messageRoom();
    if (space == 0) return false;
    size_t rest = payload.size() - offset;
    // (The tail of a payload posted in place goes in place too, however short.)
    if (inPlace != nullptr && (rest >= kMinInPlace || started)) {
      if (writeInPlace(room, *inPlace, seq, src, dst, payload, offset, started)) {
        if (offset == payload.size()) return true;
        continue;
      }
      if (!room.batch().empty()) {
        room.sealBatch();
        continue;
      }
      inPlace = nullptr;  // batches too small for it: copied
    }
    uint8_t first = started ? 0 : kFirstFragment;
    size_t whole = BatchWriter::messageSize(src.size(), dst.size(), rest, false);
    if (whole <= space) {
      room.batch().addMessage(seq, first | kLastFragment, src, dst, 0, payload.subspan(offset));
      loop::copies().sendBuffers += rest;
      offset = payload.size();
      started = true;
      return true;
    }
    bool withTotal = !started;
    size_t fixed = BatchWriter::messageSize(src.size(), dst.size(), 0, withTotal);
    if ((space < fixed + kMinFragment && !room.batch().empty()) || space <= fixed + 8) {
      room.sealBatch();
      continue;
    }
    size_t chunk = std::min(rest, (space - fixed) & ~size_t{7});
    room.batch().addMessage(seq, first, src, dst, payload.size(), payload.subspan(offset, chunk));
    loop::copies().sendBuffers += chunk;
    offset += chunk;
    started = true;
    room.sealBatch();
  }
}

bool Outbound::writeInPlace(SendRoom& room, const PayloadHandle& inPlace, uint64_t seq,
                            std::string_view src, std::string_view dst,
                            std::span<const std::byte> payload, uint64_t& offset, bool& started) {
  const size_t space = room.batch().room();
  const size_t rest = payload.size() - offset;
  const bool last = BatchWriter::messageSize(src.size(), dst.size(), rest, false) <= space;
  const size_t fixed = BatchWriter::messageSize(src.size(), dst.size(), 0, !started && !last);
  if (space < fixed + std::min(rest, kMinInPlace)) return false;
  const size_t chunk = last ? rest : std::min(rest, (space - fixed) & ~size_t{7});
  const uint8_t flags = (started ? 0 : kFirstFragment) | (last ? kLastFragment : 0);
  room.batch().addMessageHead(seq, flags, src, dst, last ? 0 : payload.size(), chunk);
  room.sealInPlace(inPlace, payload.subspan(offset, chunk));
  loop::copies().sentInPlace += chunk;
  offset += chunk;
  started = true;
  return true;
}

// Writes (the rest of) the started front message of `f`; true when done.
bool Outbound::continueFront(SendRoom& room, Flow& f) {
  Queued q = f.front();
  const auto* p = reinterpret_cast<const char*>(f.queue.data()) + sizeof q;
  std::string_view src(p, q.srcLen);
  std::span<const std::byte> payload(q.inPlace ? q.at : f.queue.data() + sizeof q + q.srcLen,
                                     q.length);
  uint64_t offset = q.offset;
  bool started = q.started;
  const PayloadHandle* inPlace =
      q.inPlace && room.canPostInPlace(f.held.front().area()) ? &f.held.front() : nullptr;
  // A started message has the newest seq: nothing else started after it.
  bool done = write(room, nextSeq_ - 1, src, f.service, payload, offset, started, inPlace);
  if (!done) {
    q.offset = offset;
    q.started = started;
    f.queue.overwrite(0, &q, sizeof q);
    return false;
  }
  popFront(f);
  return true;
}

bool Outbound::startFront(SendRoom& room, Flow& f) {
  Queued q = f.front();
  const uint64_t seq = nextSeq_++;
  inflight_.pushBack({q.session, q.msgId, &f, q.cost, false, false, q.deadline, sampleTime(seq)});
  if (retain_) {
    const auto* p = f.queue.data() + sizeof q;
    keep(seq, std::string_view(reinterpret_cast<const char*>(p), q.srcLen),
         {q.inPlace ? q.at : p + q.srcLen, q.length});
  }
  unsettled_++;
  f.unconfirmed += q.cost;
  f.waitingCost -= q.cost;
  q.waiting = false;
  f.queue.overwrite(0, &q, sizeof q);
  if (continueFront(room, f)) return true;
  current_ = &f;
  return false;
}

bool Outbound::pump(SendRoom& room) {
  if (resending() && !writeResent(room)) return false;
  if (current_ != nullptr) {
    if (!continueFront(room, *current_)) return false;
    makeReady(*current_);
    current_ = nullptr;
  }
  // Round robin: each ready flow writes up to kTurnBytes, then the next.
  size_t turns = ready_.size();
  while (!ready_.empty() && turns-- > 0) {
    if (readyNext_ >= ready_.size()) readyNext_ = 0;
    Flow& f = *ready_[readyNext_];
    size_t written = 0;
    bool linkFull = false;
    while (f.queuedMessages > 0 && written < kTurnBytes) {
      Queued q = f.front();
      if (!canStart(f, q.cost)) break;
      written += q.length + 1;
      if (!startFront(room, f)) {
        linkFull = true;
        break;
      }
    }
    if (f.queuedMessages == 0 || !canStart(f, f.front().cost)) {
      f.ready = false;  // made ready again by settle() or send()
      ready_.erase(ready_.begin() + static_cast<std::ptrdiff_t>(readyNext_));
    } else {
      readyNext_++;
    }
    if (linkFull || room.messageRoom() == 0) return false;  // a completion or credit wakes it
  }
  return !ready_.empty();
}

}  // namespace rdmamsg::peer
