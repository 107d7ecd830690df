// What the peers said their clients are interested in: per peer, the
// (queue group, pattern) pairs it announced (kInterest records), found by
// the subjects they match. A peer's interest lives as long as its
// connection (cleared when it goes: the next one announces it whole
// again) and is bounded: past maxPerPeer pairs, add() refuses, and the
// peer's connection is closed with that reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/status.h"
#include "daemon/pubsub/subject_trie.h"

namespace rdmamsg::pubsub {

class RemoteInterest {
 public:
  explicit RemoteInterest(size_t maxPerPeer) : maxPerPeer_(maxPerPeer) {}

  Status add(uint64_t peer, std::string_view group, std::string_view pattern);
  void remove(uint64_t peer, std::string_view group, std::string_view pattern);
  void clear(uint64_t peer);

  // f(peer, group) for every pair whose pattern `s` (a valid subject) matches.
  template <typename F>
  void match(std::string_view s, F&& f) const {
    trie_.match(s, [&](const Entry& e) { f(e.peer, std::string_view(e.group)); });
  }
  size_t count(uint64_t peer) const;
  size_t size() const { return trie_.size(); }

 private:
  struct Entry {
    uint64_t peer;
    std::string group;
    friend bool operator==(const Entry&, const Entry&) = default;
  };
  const size_t maxPerPeer_;
  SubjectTrie<Entry> trie_;
  // peer → ("group\npattern" → times announced)
  std::unordered_map<uint64_t, std::unordered_map<std::string, uint32_t>> byPeer_;
};

}  // namespace rdmamsg::pubsub
