// The rdmamsg subcommands: status, listen, send.
#include "client/cli/commands.h"

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "client/cli/idle_wait.h"
#include "client/cli/line_io.h"
#include "client/cli/stop_signal.h"
#include "common/openmetrics.h"
#include "rdmamsg/client.h"

namespace rdmamsg::cli {
namespace {

std::string scalarText(const nlohmann::json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

void printTable(const nlohmann::json& j) {
  std::printf("node: %s\n", j.value("node", std::string("?")).c_str());
  const auto peers = j.value("peers", nlohmann::json::array());
  std::printf("peers: %zu\n", peers.size());
  if (!peers.empty()) std::printf("  %-24s %-14s %s\n", "NAME", "STATE", "DETAILS");
  for (const auto& p : peers) {
    std::string details;
    for (const auto& [key, value] : p.items()) {
      if (key == "name" || key == "state" || value.is_structured()) continue;
      details += (details.empty() ? "" : " ") + key + "=" + scalarText(value);
    }
    std::printf("  %-24s %-14s %s\n", p.value("name", std::string("?")).c_str(),
                p.value("state", std::string("?")).c_str(), details.c_str());
  }
  std::string services;
  for (const auto& s : j.value("services", nlohmann::json::array())) {
    services += (services.empty() ? "" : ", ") + scalarText(s);
  }
  std::printf("services: %s\n", services.empty() ? "(none)" : services.c_str());
}

}  // namespace

Exit report(std::string_view what, const Status& st) {
  std::fprintf(stderr, "rdmamsg: %.*s: %s\n", static_cast<int>(what.size()), what.data(),
               st.toString().c_str());
  return exitFor(st);
}

Result<Client> connectTo(const std::string& socket, const char* name) {
  ConnectOptions opts;
  opts.clientName = name;
  return Client::connect(socket, opts);
}

Exit exitFor(const Status& status) {
  switch (status.code()) {
    case Errc::ok:
      return Exit::ok;
    case Errc::io_error:
    case Errc::not_connected:
      return Exit::no_daemon;
    case Errc::unknown_node:
      return Exit::unknown_node;
    case Errc::unknown_service:
      return Exit::unknown_service;
    case Errc::peer_unreachable:
    case Errc::timeout:
      return Exit::undelivered;
    case Errc::too_large:
      return Exit::too_large;
    case Errc::bad_request:
    case Errc::duplicate_service:
    case Errc::busy:
    case Errc::shutting_down:
    case Errc::protocol_error:
      return Exit::rejected;
    case Errc::permission_denied:
      return Exit::permission_denied;
    case Errc::no_subscribers:
    case Errc::no_responders:
      return Exit::nobody;
    case Errc::would_block:  // the CLI sends with send(), which waits instead
      return Exit::failure;
  }
  return Exit::failure;
}

std::string exitCodeHelp() {
  return "Exit codes:\n"
         "  0  success (send: every message was taken by the listening application)\n"
         "  1  other failure\n"
         "  2  usage error\n"
         "  3  cannot reach rdmamsgd (socket missing, daemon stopped)\n"
         "  4  unknown node\n"
         "  5  unknown service (no listener on the destination node)\n"
         "  6  not delivered: peer unreachable or not confirmed in time\n"
         "  7  message too large\n"
         "  8  rejected by the daemon (duplicate service, bad name, busy, shutting down)\n"
         "  9  permission denied by the daemon's local policy (connect, register or send)\n"
         "  10 nobody listens: no subscription matched (pub: no_subscribers; request: "
         "no_responders)";
}

Exit runStatus(const StatusArgs& args) {
  auto client = connectTo(args.socket, "rdmamsg-status");
  if (!client) return report("status", client.status());
  Result<std::string> text = client->status();
  if (!text) return report("status", text.status());
  const nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded()) {
    return report("status", Status(Errc::protocol_error, "daemon sent invalid JSON"));
  }
  if (args.metrics) {
    std::fputs(metrics::render(j).c_str(), stdout);
  } else if (args.json) {
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    printTable(j);
  }
  return Exit::ok;
}

Exit runListen(const ListenArgs& args) {
  installStopHandlers();
  auto client = connectTo(args.socket, "rdmamsg-listen");
  if (!client) return report("listen", client.status());
  applyIdleStrategy(*client, args.idleStrategy);
  if (Status st = client->registerService(args.service); !st.ok()) {
    return report("register " + args.service, st);
  }
  // A message counts as taken once it is written out: its sender is
  // confirmed only after the flush that wrote it.
  client->setConfirmOnReceive(false);
  Message m;
  uint64_t received = 0;
  LineWriter out(STDOUT_FILENO);
  auto flushAndConfirm = [&] {
    if (!out.flush()) return false;
    // A lost connection shows in the next receive, which reports it.
    static_cast<void>(client->confirmReceived());
    return true;
  };
  auto print = [&](const Message& msg) {
    ++received;
    return out.write(msg.text());
  };
  bool printed = true;
  while (printed && (!args.count || received < *args.count)) {
    if (stopRequested()) break;
    if (!client->tryReceive(m)) {
      printed = flushAndConfirm();  // batch output while messages stream in
      Status st = client->receive(m, std::chrono::milliseconds(200));
      if (st.code() == Errc::timeout) continue;
      if (!st.ok()) {
        flushAndConfirm();
        return report("listen " + args.service, st);
      }
    }
    printed = printed && print(m);
  }
  // Stopped by a signal: what the daemon already handed over is printed too.
  while (printed && (!args.count || received < *args.count) && client->tryReceive(m))
    printed = print(m);
  if (!flushAndConfirm()) {
    std::fprintf(stderr, "rdmamsg: listen %s: writing standard output: %s\n", args.service.c_str(),
                 std::strerror(out.error()));
    return Exit::failure;
  }
  return Exit::ok;
}

}  // namespace rdmamsg::cli
