// The peers' interest (remote_interest.h).
#include "daemon/pubsub/remote_interest.h"

#include "common/local_protocol.h"
#include "common/subject.h"

namespace rdmamsg::pubsub {

Status RemoteInterest::add(uint64_t peer, std::string_view group, std::string_view pattern) {
  if (Status st = subject::checkPattern(pattern); !st.ok())
    return Status(Errc::protocol_error, "interest in an invalid pattern: " + st.message());
  if (!group.empty() && !proto::isValidName(group))
    return Status(Errc::protocol_error, "interest with an invalid queue group name");
  auto& mine = byPeer_[peer];
  std::string key;
  key.append(group).append(1, '\n').append(pattern);
  auto it = mine.find(key);
  if (it != mine.end()) {
    ++it->second;  // announced twice: counted, filed once
    return Status();
  }
  if (mine.size() >= maxPerPeer_)
    return Status(Errc::busy, "the peer announced more than max_peer_interest (" +
                                  std::to_string(maxPerPeer_) + ") subscription patterns");
  mine.emplace(std::move(key), 1);
  trie_.insert(pattern, Entry{peer, std::string(group)});
  return Status();
}

void RemoteInterest::remove(uint64_t peer, std::string_view group, std::string_view pattern) {
  auto mine = byPeer_.find(peer);
  if (mine == byPeer_.end()) return;
  std::string key;
  key.append(group).append(1, '\n').append(pattern);
  auto it = mine->second.find(key);
  if (it == mine->second.end() || --it->second > 0) return;
  mine->second.erase(it);
  trie_.erase(pattern, Entry{peer, std::string(group)});
}

void RemoteInterest::clear(uint64_t peer) {
  auto mine = byPeer_.find(peer);
  if (mine == byPeer_.end()) return;
  for (const auto& [key, count] : mine->second) {
    const size_t cut = key.find('\n');
    trie_.erase(std::string_view(key).substr(cut + 1), Entry{peer, key.substr(0, cut)});
  }
  byPeer_.erase(mine);
}

size_t RemoteInterest::count(uint64_t peer) const {
  auto mine = byPeer_.find(peer);
  return mine == byPeer_.end() ? 0 : mine->second.size();
}

}  // namespace rdmamsg::pubsub
