// The --check-config command.
#include "config/check_command.h"

#include "config/loader.h"

namespace rdmamsg::config {

int checkConfigCommand(const std::string& path, std::optional<std::string> node, std::ostream& out,
                       std::ostream& err) {
  const LoadResult result = loadConfig(path, std::move(node));
  if (!result) {
    for (const ConfigProblem& problem : result.problems())
      err << problem.toString() << '\n';
    return kExitConfig;
  }
  const Config& config = result.config();
  const std::size_t peers = config.peers.size();
  out << path << ": OK: node " << config.node << ", listen " << toString(config.listenRails())
      << ", " << peers << (peers == 1 ? " peer" : " peers");
  if (config.railPolicy == RailPolicy::kSpread)
    out << ", rail_policy spread: " << config.laneCount()
        << (config.laneCount() == 1 ? " connection" : " connections");
  out << '\n';
  if (config.local.localPolicy)
    out << "local_policy: " << describe(config.local.localPolicy) << '\n';
  if (config.auth.secret) {
    out << "secret_file: " << config.auth.secret->file << " (fingerprint "
        << config.auth.secret->fingerprint << ")";
    if (config.auth.previousSecret)
      out << "; previous_secret_file: " << config.auth.previousSecret->file << " (fingerprint "
          << config.auth.previousSecret->fingerprint << ")";
    out << '\n';
  }
  return 0;
}

}  // namespace rdmamsg::config
