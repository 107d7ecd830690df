package org.rdmamsg.tool;

import java.util.ArrayList;
import java.util.List;
import org.rdmamsg.Client;
import org.rdmamsg.Errc;
import org.rdmamsg.RdmamsgException;

/**
 * {@code java -jar rdmamsg.jar}: the smallest program over the Java client,
 * behaving like the {@code rdmamsg} tool's {@code send}, {@code listen} and
 * {@code status --json}, exit codes included (docs/cli.md).
 */
public final class Main {
  /** Process exit codes, as {@code rdmamsg}'s (client/cli/commands.h). */
  static final int OK = 0;
  static final int FAILURE = 1;
  static final int USAGE = 2;
  static final int NO_DAEMON = 3;
  static final int UNKNOWN_NODE = 4;
  static final int UNKNOWN_SERVICE = 5;
  static final int UNDELIVERED = 6;
  static final int TOO_LARGE = 7;
  static final int REJECTED = 8;
  static final int PERMISSION_DENIED = 9;
  static final int NOBODY = 10; // no subscription matched (this tool does not publish)

  private static final String USAGE_TEXT = """
      usage: java -jar rdmamsg.jar [--socket PATH] COMMAND ...

        send NODE/SERVICE [MESSAGE] [--window N] [--timeout SECONDS]
            Send MESSAGE (or each line of stdin) to NODE/SERVICE; exit 0 once every
            message was taken by a listener. --window: messages in flight (4096);
            --timeout: seconds to wait for each confirmation (60).
        listen SERVICE [--count N]
            Register SERVICE and print each message received, one per line;
            exit 0 after N messages, or on SIGINT/SIGTERM.
        status
            Print the daemon's status as JSON.

      --socket: rdmamsgd's Unix socket (default: $RDMAMSG_SOCKET, else
      /run/rdmamsg/rdmamsgd.sock).

      Exit codes:
        0  success (send: every message was taken by a listener)
        1  other failure
        2  usage error
        3  cannot reach rdmamsgd (socket missing, daemon stopped)
        4  unknown node
        5  unknown service (no listener on the destination node)
        6  not delivered: peer unreachable or not confirmed in time
        7  message too large
        8  rejected by the daemon (duplicate service, bad name, busy, shutting down)
        9  permission denied by the daemon's local policy (connect, register or send)
      """;

  private Main() {}

  public static void main(String[] args) {
    int code = run(args);
    System.out.flush();
    System.err.flush();
    System.exit(code);
  }

  /** Runs a command line; the exit code. */
  static int run(String[] args) {
    String socket = Client.defaultSocketPath();
    int i = 0;
    while (i < args.length && args[i].startsWith("-")) {
      String a = args[i];
      if (a.equals("--help") || a.equals("-h")) {
        System.out.print(USAGE_TEXT);
        return OK;
      } else if (a.equals("--socket") && i + 1 < args.length) {
        socket = args[i + 1];
        i += 2;
      } else if (a.startsWith("--socket=")) {
        socket = a.substring("--socket=".length());
        i++;
      } else {
        return usage("unknown option " + a);
      }
    }
    if (i == args.length) return usage("a command is required");
    String command = args[i++];
    List<String> rest = new ArrayList<>(List.of(args).subList(i, args.length));
    if (rest.contains("--help") || rest.contains("-h")) {
      System.out.print(USAGE_TEXT);
      return OK;
    }
    try {
      return switch (command) {
        case "send" -> SendCommand.run(socket, rest);
        case "listen" -> ListenCommand.run(socket, rest);
        case "status" -> status(socket, rest);
        default -> usage("unknown command " + command);
      };
    } catch (UsageException e) {
      return usage(e.getMessage());
    }
  }

  private static int status(String socket, List<String> args) throws UsageException {
    if (!args.isEmpty() && !(args.size() == 1 && args.get(0).equals("--json"))) {
      throw new UsageException("status takes no arguments but --json");
    }
    try (Client c = Client.connect(socket, new org.rdmamsg.ConnectOptions().clientName(
        "rdmamsg-java-status"))) {
      System.out.println(c.status());
      return OK;
    } catch (RdmamsgException e) {
      return report("status", e);
    }
  }

  static int usage(String why) {
    System.err.println("rdmamsg: " + why);
    System.err.print(USAGE_TEXT);
    return USAGE;
  }

  /** Prints {@code rdmamsg: WHAT: errc: detail} to stderr; the exit code for it. */
  static int report(String what, RdmamsgException e) {
    System.err.println("rdmamsg: " + what + ": " + e.getMessage());
    return exitFor(e.errc());
  }

  /** The exit code for a failure, as {@code rdmamsg}'s exitFor. */
  static int exitFor(Errc errc) {
    return switch (errc) {
      case OK -> OK;
      case IO_ERROR, NOT_CONNECTED -> NO_DAEMON;
      case UNKNOWN_NODE -> UNKNOWN_NODE;
      case UNKNOWN_SERVICE -> UNKNOWN_SERVICE;
      case PEER_UNREACHABLE, TIMEOUT -> UNDELIVERED;
      case TOO_LARGE -> TOO_LARGE;
      case BAD_REQUEST, DUPLICATE_SERVICE, BUSY, SHUTTING_DOWN, PROTOCOL_ERROR -> REJECTED;
      case PERMISSION_DENIED -> PERMISSION_DENIED;
      case NO_SUBSCRIBERS, NO_RESPONDERS -> NOBODY;
      case WOULD_BLOCK -> FAILURE;
    };
  }

  /** A bad command line. */
  static final class UsageException extends Exception {
    private static final long serialVersionUID = 1L;

    UsageException(String why) {
      super(why);
    }
  }

  /** The value after option {@code name} at {@code i}, as a positive number. */
  static long positive(List<String> args, int i, String name) throws UsageException {
    if (i + 1 >= args.size()) throw new UsageException(name + " needs a value");
    try {
      long v = Long.parseLong(args.get(i + 1));
      if (v <= 0) throw new NumberFormatException();
      return v;
    } catch (NumberFormatException e) {
      throw new UsageException(name + " must be a positive number, not " + args.get(i + 1));
    }
  }
}
