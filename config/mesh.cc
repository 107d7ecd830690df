// Reading `peers` and working out which entry is this node.
#include "config/mesh.h"

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
  entry.address = fields.parsed("address", parseAddress, /*required=*/true);
  if (auto verify = fields.parsed("verify_address", parseBool)) entry.verifyAddress = *verify;
  return entry;
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
      if (a.address && b.address && *a.address == *b.address) {
        sink.add(b.addressMark, b.path + ".address: duplicate peer address " +
                                    b.address->toString() + " (also at line " +
                                    lineOf(a.addressMark) + ")");
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
std::optional<Address> resolveListen(const FieldMap& top, const SelfInput& self,
                                     const PeerEntry* own) {
  if (self.listenGiven) return self.listen;
  if (own != nullptr) return own->address;  // nullopt if invalid: already reported
  if (self.node && !self.fromOverride) {    // with --node, a missing entry is reported already
    top.report("listen",
               "missing, and node '" + *self.node + "' has no entry in peers to take it from");
  }
  return std::nullopt;
}

}  // namespace

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
  if (own != nullptr && own->address) config.ownAddress = own->address;
  if (auto listen = resolveListen(top, self, own)) config.listen = *listen;

  for (const PeerEntry& entry : entries) {
    if (&entry == own || !entry.name || !entry.address) continue;
    const bool ownAddress = own != nullptr && own->address == entry.address;
    if (self.listenGiven && self.listen == entry.address && !ownAddress) {
      top.sink().add(entry.addressMark, entry.path + ".address: " + entry.address->toString() +
                                            " is this node's listen address");
    }
    config.peers.push_back(Peer{*entry.name, *entry.address, entry.verifyAddress});
  }
}

}  // namespace rdmamsg::config::detail
