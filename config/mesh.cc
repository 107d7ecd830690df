// Reading `peers` and working out which entry is this node.
#include "config/mesh.h"

#include <algorithm>

#include "config/loader.h"

namespace rdmamsg::config::detail {
namespace {

std::string lineOf(const YAML::Mark& mark) {
  return std::to_string(mark.line + 1);
}

PeerEntry readPeer(const YAML::Node& node, std::string path, ProblemSink& sink) {
  PeerEntry entry{std::move(path), std::nullopt, std::nullopt, true, node.Mark(), node.Mark()};
  if (!node.IsMap()) {
    sink.add(node.Mark(), entry.path + ": expected a mapping with name and address, got " +
                              describeNodeType(node));
    return entry;
  }
  FieldMap fields(node, entry.path, kPeerKeys, sink);
  entry.nameMark = fields.markOf("name");
  entry.addressMark = fields.markOf("address");
  entry.name = fields.scalar("name", /*required=*/true);
  if (entry.name && !isValidName(*entry.name)) {
    fields.report("name",
                  "invalid node name '" + *entry.name + "' (" + std::string(kNameRule) + ")");
    entry.name.reset();
  }
  entry.address = readRails(fields, "address", /*required=*/true);
  if (auto verify = fields.parsed("verify_address", parseBool)) entry.verifyAddress = *verify;
  return entry;
}

// An address both lists hold, or nullptr.
const Address* firstShared(const std::vector<Address>& a, const std::vector<Address>& b) {
  for (const Address& x : b)
    if (std::find(a.begin(), a.end(), x) != a.end()) return &x;
  return nullptr;
}

void checkDuplicates(const std::vector<PeerEntry>& entries, ProblemSink& sink) {
  for (std::size_t i = 0; i < entries.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      const PeerEntry& a = entries[j];
      const PeerEntry& b = entries[i];
      if (a.name && b.name && *a.name == *b.name) {
        sink.add(b.nameMark, b.path + ".name: duplicate peer name '" + *b.name +
                                 "' (also at line " + lineOf(a.nameMark) + ")");
        break;
      }
    }
    for (std::size_t j = 0; j < i; ++j) {
      const PeerEntry& a = entries[j];
      const PeerEntry& b = entries[i];
      const Address* shared =
          a.address && b.address ? firstShared(*a.address, *b.address) : nullptr;
      if (shared != nullptr) {
        sink.add(b.addressMark, b.path + ".address: duplicate peer address " + shared->toString() +
                                    " (also at line " + lineOf(a.addressMark) + ")");
        break;
      }
    }
  }
}

const PeerEntry* findEntry(const std::vector<PeerEntry>& entries, const std::string& name) {
  for (const PeerEntry& entry : entries) {
    if (entry.name == name) return &entry;
  }
  return nullptr;
}

std::string knownNames(const std::vector<PeerEntry>& entries) {
  std::string names;
  for (const PeerEntry& entry : entries) {
    if (entry.name) names += (names.empty() ? "" : ", ") + *entry.name;
  }
  return names.empty() ? "none" : names;
}

// The listen address: `listen:` if given, else this node's own peers entry.
std::optional<std::vector<Address>> resolveListen(const FieldMap& top, const SelfInput& self,
                                                  const PeerEntry* own) {
  if (self.listenGiven) {
    // Its own entry names the same rails: where the others dial each of them.
    if (self.listen && own != nullptr && own->address &&
        own->address->size() != self.listen->size()) {
      top.report("listen", "lists " + std::to_string(self.listen->size()) +
                               " rail(s), but this node's entry in peers (line " +
                               lineOf(own->addressMark) + ") lists " +
                               std::to_string(own->address->size()) +
                               ": give both the same rails, in the same order");
      return std::nullopt;
    }
    return self.listen;
  }
  if (own != nullptr) return own->address;  // nullopt if invalid: already reported
  if (self.node && !self.fromOverride) {    // with --node, a missing entry is reported already
    top.report("listen",
               "missing, and node '" + *self.node + "' has no entry in peers to take it from");
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::vector<Address>> readRails(const FieldMap& fields, std::string_view key,
                                              bool required) {
  const YAML::Node list = fields.value(key);
  if (!list.IsSequence()) {
    auto one = fields.parsed(key, parseAddress, required);
    if (!one) return std::nullopt;
    return std::vector<Address>{*one};
  }
  const std::string path = fields.pathOf(key);
  if (list.size() == 0 || list.size() > kMaxRails) {
    fields.report(key, "expected one address, or a list of 1 to " + std::to_string(kMaxRails) +
                           " (one per rail), got a list of " + std::to_string(list.size()));
    return std::nullopt;
  }
  std::vector<Address> rails;
  bool ok = true;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const YAML::Node item = list[i];
    const std::string at = path + "[" + std::to_string(i) + "]";
    if (!item.IsScalar()) {
      fields.sink().add(item.Mark(), at + ": expected an address, got " + describeNodeType(item));
      ok = false;
      continue;
    }
    Parsed<Address> a = parseAddress(item.Scalar());
    if (!a) {
      fields.sink().add(item.Mark(), at + ": " + a.error);
      ok = false;
    } else if (list.size() > 1 && a.value->isWildcard()) {
      fields.sink().add(item.Mark(), at + ": " + a.value->toString() +
                                         " is a wildcard; a rail is one interface's own address");
      ok = false;
    } else if (std::find(rails.begin(), rails.end(), *a.value) != rails.end()) {
      fields.sink().add(item.Mark(), at + ": " + a.value->toString() + " is listed twice");
      ok = false;
    } else {
      rails.push_back(*a.value);
    }
  }
  if (!ok) return std::nullopt;
  return rails;
}

std::vector<PeerEntry> readPeers(const FieldMap& top) {
  std::vector<PeerEntry> entries;
  const YAML::Node peers = top.value("peers");
  if (!peers.IsDefined()) {
    top.report("peers", "missing (list the other daemons; an empty list is [])");
  } else if (!peers.IsSequence()) {
    top.report("peers", "expected a list of {name, address}, got " + describeNodeType(peers));
  } else {
    for (std::size_t i = 0; i < peers.size(); ++i) {
      entries.push_back(readPeer(peers[i], "peers[" + std::to_string(i) + "]", top.sink()));
    }
  }
  return entries;
}

void resolveMesh(const FieldMap& top, const SelfInput& self, const std::vector<PeerEntry>& entries,
                 Config& config) {
  checkDuplicates(entries, top.sink());
  const PeerEntry* own = self.node ? findEntry(entries, *self.node) : nullptr;
  if (self.fromOverride && self.node && own == nullptr) {
    top.sink().add(top.markOf("peers"),
                   "--node " + *self.node +
                       ": no entry with that name in peers (known: " + knownNames(entries) + ")");
  }
  if (self.node) config.node = *self.node;
  if (own != nullptr && own->address) config.ownAddress = own->address->front();
  if (auto listen = resolveListen(top, self, own)) {
    config.listen = listen->front();
    config.extraListen.assign(listen->begin() + 1, listen->end());
  }

  for (const PeerEntry& entry : entries) {
    if (&entry == own || !entry.name || !entry.address) continue;
    const Address* shared =
        self.listenGiven && self.listen ? firstShared(*self.listen, *entry.address) : nullptr;
    const bool ownAddress =
        own != nullptr && own->address && shared != nullptr &&
        std::find(own->address->begin(), own->address->end(), *shared) != own->address->end();
    if (shared != nullptr && !ownAddress) {
      top.sink().add(entry.addressMark, entry.path + ".address: " + shared->toString() +
                                            " is this node's listen address");
    }
    config.peers.push_back(Peer{*entry.name,
                                entry.address->front(),
                                entry.verifyAddress,
                                {entry.address->begin() + 1, entry.address->end()}});
  }
}

}  // namespace rdmamsg::config::detail
