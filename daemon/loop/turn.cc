// The phases of a loop turn (turn.h).
#include "daemon/loop/turn.h"

#include <algorithm>

#include "daemon/loop/event_loop.h"

namespace rdmamsg::loop {

const char* toString(Phase p) {
  switch (p) {
    case Phase::service:
      return "service";
    case Phase::report:
      return "report";
    case Phase::flush:
      return "flush";
    case Phase::post:
      return "post";
    case Phase::reap:
      return "reap";
  }
  return "?";
}

Turn::Turn(EventLoop& loop) : runner_(loop, [this] { run(); }) {}

void Turn::mark(PhaseTask* task) {
  pending_[static_cast<size_t>(task->phase_)].push_back(task);
  runner_.schedule();
}

void Turn::forget(PhaseTask* task) {
  auto& list = pending_[static_cast<size_t>(task->phase_)];
  list.erase(std::remove(list.begin(), list.end(), task), list.end());
  std::replace(running_.begin(), running_.end(), task, static_cast<PhaseTask*>(nullptr));
}

bool Turn::pending() const {
  for (const auto& list : pending_)
    if (!list.empty()) return true;
  return false;
}

void Turn::run() {
  size_t phase = 0;
  while (phase < kPhases && pending_[phase].empty())
    phase++;
  for (size_t steps = 0; steps < kMaxSteps && phase < kPhases; steps++) {
    running_.swap(pending_[phase]);
    for (size_t i = 0; i < running_.size(); i++) {
      PhaseTask* t = running_[i];
      if (t == nullptr) continue;  // destroyed by an earlier task of this phase
      t->scheduled_ = false;
      t->cb_();
    }
    running_.clear();
    // Round again from the earliest phase that has work; else the next.
    size_t next = 0;
    while (next <= phase && pending_[next].empty())
      next++;
    phase = next <= phase ? next : phase + 1;
    while (phase < kPhases && pending_[phase].empty())
      phase++;
  }
  for (const auto& list : pending_)
    if (!list.empty()) return runner_.schedule();  // the next iteration goes on
}

PhaseTask::PhaseTask(EventLoop& loop, Phase phase, Callback cb)
    : turn_(loop.turn()), phase_(phase), cb_(std::move(cb)) {}

PhaseTask::~PhaseTask() {
  turn_.forget(this);
}

void PhaseTask::schedule() {
  if (scheduled_) return;
  scheduled_ = true;
  turn_.mark(this);
}

}  // namespace rdmamsg::loop
