// PublishTable: the publishes and requests of this host's clients not
// answered yet, by token, with their deadlines (pubsub.h).
//
// A publish costs no allocation and no tree operation once the table is
// warm:
// - entries live in a deque (references stay valid while it grows) and
//   are reused through a free list;
// - a token names an entry and its use, index | generation << 32, so a
//   stale token (a late result for an entry reused since) finds nothing;
// - deadlines that come in the order they were set (every publish waits
//   the same message_timeout) are a list threaded through the entries,
//   each unlinked at once when its publish is answered; a deadline earlier
//   than the list's last (a request's own timeout, or a shorter
//   message_timeout after a reload) goes into an ordered set instead.
// So the table holds no more than the entries outstanding, whatever the
// publish rate.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <set>
#include <utility>
#include <vector>

namespace rdmamsg::pubsub {

template <typename T>
class PublishTable {
 public:
  using Clock = std::chrono::steady_clock;
  using Token = uint64_t;

  // A new entry (T as reset() or T{} left it) and its token (never 0).
  std::pair<Token, T&> add() {
    uint32_t i;
    if (!free_.empty()) {
      i = free_.back();
      free_.pop_back();
    } else {
      i = static_cast<uint32_t>(entries_.size());
      entries_.emplace_back();
    }
    Entry& e = entries_[i];
    if (++e.generation == 0) e.generation = 1;
    e.live = true;
    live_++;
    return {tokenOf(i, e), e.value};
  }

  T* find(Token token) {
    Entry* e = entry(token);
    return e == nullptr ? nullptr : &e->value;
  }

  // Removes the entry and its deadline; false when the token is stale.
  bool remove(Token token) {
    Entry* e = entry(token);
    if (e == nullptr) return false;
    const uint32_t i = indexOf(token);
    clearDeadline(i, *e);
    if constexpr (requires(T & v) { v.reset(); })
      e->value.reset();
    else
      e->value = T{};
    e->live = false;
    live_--;
    free_.push_back(i);
    return true;
  }

  size_t size() const { return live_; }
  size_t deadlines() const { return listed_ + early_.size(); }

  // Sets the entry's deadline (it has none yet). True when it is now the
  // earliest of all: the caller's timer should fire sooner.
  bool setDeadline(Token token, Clock::time_point at) {
    Entry* e = entry(token);
    if (e == nullptr || e->where != Where::kNone) return false;
    const std::optional<Clock::time_point> before = earliest();
    const uint32_t i = indexOf(token);
    e->deadline = at;
    if (tail_ == kNone || entries_[tail_].deadline <= at) {
      e->where = Where::kList;
      e->prev = tail_;
      e->next = kNone;
      (tail_ == kNone ? head_ : entries_[tail_].next) = i;
      tail_ = i;
      listed_++;
    } else {
      e->where = Where::kSet;
      early_.emplace(at, i);
    }
    return !before || at < *before;
  }

  std::optional<Clock::time_point> earliest() const {
    std::optional<Clock::time_point> t;
    if (head_ != kNone) t = entries_[head_].deadline;
    if (!early_.empty() && (!t || early_.begin()->first < *t)) t = early_.begin()->first;
    return t;
  }

  // The token of an entry whose deadline is at or before `now`, its
  // deadline cleared (the entry stays); 0 when none is due.
  Token popExpired(Clock::time_point now) {
    const std::optional<Clock::time_point> t = earliest();
    if (!t || *t > now) return 0;
    const uint32_t i =
        (head_ != kNone && entries_[head_].deadline == *t) ? head_ : early_.begin()->second;
    Entry& e = entries_[i];
    clearDeadline(i, e);
    return tokenOf(i, e);
  }

  // f(token, value) for every entry; f must not add or remove entries.
  template <typename F>
  void forEach(F&& f) {
    for (size_t i = 0; i < entries_.size(); i++)
      if (entries_[i].live) f(tokenOf(static_cast<uint32_t>(i), entries_[i]), entries_[i].value);
  }

 private:
  static constexpr uint32_t kNone = UINT32_MAX;
  enum class Where : uint8_t { kNone, kList, kSet };
  struct Entry {
    T value{};
    uint32_t generation = 0;
    bool live = false;
    Where where = Where::kNone;
    uint32_t prev = kNone, next = kNone;  // in the list, by deadline
    Clock::time_point deadline{};
  };

  static Token tokenOf(uint32_t i, const Entry& e) { return uint64_t{e.generation} << 32 | i; }
  static uint32_t indexOf(Token t) { return static_cast<uint32_t>(t); }

  Entry* entry(Token token) {
    const uint32_t i = indexOf(token);
    if (i >= entries_.size()) return nullptr;
    Entry& e = entries_[i];
    if (!e.live || e.generation != static_cast<uint32_t>(token >> 32)) return nullptr;
    return &e;
  }

  void clearDeadline(uint32_t i, Entry& e) {
    if (e.where == Where::kList) {
      (e.prev == kNone ? head_ : entries_[e.prev].next) = e.next;
      (e.next == kNone ? tail_ : entries_[e.next].prev) = e.prev;
      e.prev = e.next = kNone;
      listed_--;
    } else if (e.where == Where::kSet) {
      early_.erase({e.deadline, i});
    }
    e.where = Where::kNone;
  }

  std::deque<Entry> entries_;
  std::vector<uint32_t> free_;
  size_t live_ = 0;
  uint32_t head_ = kNone, tail_ = kNone;
  size_t listed_ = 0;
  std::set<std::pair<Clock::time_point, uint32_t>> early_;
};

}  // namespace rdmamsg::pubsub
