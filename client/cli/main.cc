// rdmamsg: command-line client of rdmamsgd (status, listen, send).
#include <CLI/CLI.hpp>

#include "client/cli/commands.h"
#include "rdmamsg/client.h"

int main(int argc, char** argv) {
  using namespace rdmamsg::cli;
  CLI::App app{"rdmamsg - send and receive messages through the local rdmamsgd"};
  app.require_subcommand(1);
  app.footer(exitCodeHelp());
  std::string socket = rdmamsg::Client::defaultSocketPath();
  app.add_option("--socket", socket,
                 "rdmamsgd's Unix socket (default: $RDMAMSG_SOCKET, else "
                 "/run/rdmamsg/rdmamsgd.sock)")
      ->capture_default_str();

  StatusArgs statusArgs;
  auto* status = app.add_subcommand("status", "Show this node, its peers and local services");
  status->add_flag("--json", statusArgs.json, "Print the daemon's JSON status as is");

  ListenArgs listenArgs;
  auto* listen = app.add_subcommand(
      "listen", "Register SERVICE and print each message received, one per line");
  listen->add_option("SERVICE", listenArgs.service, "Service name to register")->required();
  listen->add_option("--count,-n", listenArgs.count, "Exit 0 after N messages")
      ->check(CLI::PositiveNumber);

  SendArgs sendArgs;
  auto* send = app.add_subcommand(
      "send",
      "Send MESSAGE (or each line of stdin) to NODE/SERVICE; exit 0 once every message was "
      "handed to a listener");
  send->add_option("DESTINATION", sendArgs.destination, "NODE/SERVICE")->required();
  send->add_option("MESSAGE", sendArgs.message, "Message text (default: stdin, one per line)");
  send->add_option("--window", sendArgs.window, "Maximum unacknowledged messages in flight")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  send->add_option("--timeout", sendArgs.timeoutSeconds,
                   "Seconds to wait for each confirmation before giving up")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);  // prints help or the error
    return rc == 0 ? 0 : static_cast<int>(Exit::usage);
  }
  statusArgs.socket = listenArgs.socket = sendArgs.socket = socket;
  if (status->parsed()) return static_cast<int>(runStatus(statusArgs));
  if (listen->parsed()) return static_cast<int>(runListen(listenArgs));
  return static_cast<int>(runSend(sendArgs));
}
