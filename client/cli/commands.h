// The rdmamsg command-line tool's subcommands and exit codes.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "rdmamsg/status.h"

namespace rdmamsg::cli {

// Process exit codes (documented in --help and docs/cli.md).
enum class Exit : int {
  ok = 0,
  failure = 1,          // anything not listed below
  usage = 2,            // bad command line
  no_daemon = 3,        // cannot connect to rdmamsgd, or it closed the connection
  unknown_node = 4,     // destination node not configured
  unknown_service = 5,  // no listener for the service on the destination node
  undelivered = 6,      // peer unreachable or no confirmation in time
  too_large = 7,        // message larger than the configured maximum
  rejected = 8,         // refused by the daemon (duplicate service, bad request, busy, shutdown)
};

// The exit code for a failed Status.
Exit exitFor(const Status& status);

// The exit-code table for --help.
std::string exitCodeHelp();

struct StatusArgs {
  std::string socket;
  bool json = false;
};
struct ListenArgs {
  std::string socket;
  std::string service;
  std::optional<uint64_t> count;
};
struct SendArgs {
  std::string socket;
  std::string destination;  // NODE/SERVICE
  std::optional<std::string> message;
  size_t window = 4096;
  unsigned timeoutSeconds = 60;
};

Exit runStatus(const StatusArgs& args);
Exit runListen(const ListenArgs& args);
Exit runSend(const SendArgs& args);

}  // namespace rdmamsg::cli
