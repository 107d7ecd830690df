// Internal to the loader: the `peers` list, this node's own entry in it, and the checks
// that span several entries (duplicate names and addresses, the listen address).
//
// One mesh file may serve every host: it may list the node itself among the peers.
// The loader drops that entry from Config::peers, and when `listen:` is absent it takes
// the listen address from it.
//
// Rails: `listen` and a peer's `address` are one address or a list of them, one per
// rail (NIC). In a list every address is a host's own (no wildcard) and appears once;
// no address is two nodes'.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/yaml_fields.h"

namespace rdmamsg::config::detail {

// One entry of `peers` as written; a part that was invalid (already reported) is nullopt.
struct PeerEntry {
  std::string path;  // "peers[1]"
  std::optional<std::string> name;
  std::optional<std::vector<Address>> address;  // one per rail
  bool verifyAddress = true;
  YAML::Mark nameMark;
  YAML::Mark addressMark;
};

// Reads `peers`: a list of mappings with `name` and `address`. Reports every problem.
std::vector<PeerEntry> readPeers(const FieldMap& top);

// What the rest of the file says about this node.
struct SelfInput {
  std::optional<std::string> node;  // valid name (from --node or `node:`), nullopt if not
  bool fromOverride = false;        // node came from --node
  bool listenGiven = false;         // `listen:` is in the file (valid or not)
  std::optional<std::vector<Address>> listen;  // its parsed value (one per rail), when valid
};

// `key` of `fields`: one address, or a list of them, one per rail. Every problem is
// reported (nullopt then): an empty or too long list, an entry that is not an
// address, a wildcard in a list, an address listed twice.
std::optional<std::vector<Address>> readRails(const FieldMap& fields, std::string_view key,
                                              bool required);

// Sets config.node, config.listen and config.peers (self removed); reports duplicate
// names and addresses, a --node missing from peers, a missing listen address, a
// peer that claims this node's listen address, and a `listen` list whose length is
// not that of this node's own entry (the same rails, in the same order).
void resolveMesh(const FieldMap& top, const SelfInput& self, const std::vector<PeerEntry>& entries,
                 Config& config);

}  // namespace rdmamsg::config::detail
