package org.rdmamsg.tool;

import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.TreeSet;
import org.rdmamsg.Client;
import org.rdmamsg.Completion;
import org.rdmamsg.ConnectOptions;
import org.rdmamsg.Errc;
import org.rdmamsg.RdmamsgException;

/**
 * {@code send NODE/SERVICE [MESSAGE]}: streams messages with a bounded window
 * of unconfirmed ones and exits 0 only when every one was confirmed; after a
 * failure it says which messages were confirmed, as {@code rdmamsg send}.
 * Message ids are 1, 2, 3, ... on a fresh client: the id of a message is its
 * line number.
 */
final class SendCommand {
  private final Client client;
  private final String node;
  private final String service;
  private final long window;
  private final Duration timeout;
  private long sent;
  private long confirmed;
  private long failed;
  private long prefix; // messages 1..prefix are all confirmed
  private final TreeSet<Long> confirmedAhead = new TreeSet<>(); // confirmed ids above prefix + 1
  private boolean connected = true;
  private RdmamsgException failure;
  private long failedId; // the message that failed first, 0 if none in particular

  private SendCommand(Client client, String node, String service, long window, Duration timeout) {
    this.client = client;
    this.node = node;
    this.service = service;
    this.window = window;
    this.timeout = timeout;
  }

  static int run(String socket, List<String> args) throws Main.UsageException {
    String destination = null;
    String message = null;
    long window = 4096;
    long timeoutSeconds = 60;
    for (int i = 0; i < args.size(); i++) {
      String a = args.get(i);
      if (a.equals("--window")) {
        window = Main.positive(args, i++, a);
      } else if (a.equals("--timeout")) {
        timeoutSeconds = Main.positive(args, i++, a);
      } else if (a.startsWith("-") && a.length() > 1) {
        throw new Main.UsageException("send: unknown option " + a);
      } else if (destination == null) {
        destination = a;
      } else if (message == null) {
        message = a;
      } else {
        throw new Main.UsageException("send: unexpected argument " + a);
      }
    }
    if (destination == null) throw new Main.UsageException("send: NODE/SERVICE is required");
    int slash = destination.indexOf('/');
    if (slash < 0) {
      System.err.println("rdmamsg: send: destination must be NODE/SERVICE, got '" + destination
          + "'");
      return Main.USAGE;
    }
    Client client;
    try {
      client = Client.connect(socket, new ConnectOptions().clientName("rdmamsg-java-send"));
    } catch (RdmamsgException e) {
      System.err.println("rdmamsg: send: " + e.getMessage());
      return Main.exitFor(e.errc());
    }
    try (client) {
      SendCommand s = new SendCommand(client, destination.substring(0, slash),
          destination.substring(slash + 1), window, Duration.ofSeconds(timeoutSeconds));
      IOException readError = null;
      if (message != null) {
        s.send(ByteBuffer.wrap(message.getBytes(StandardCharsets.UTF_8)));
      } else {
        try {
          s.sendLines(System.in); // stops at the first failure
        } catch (IOException e) {
          readError = e;
        }
      }
      s.finish(); // what was sent is still confirmed, or reported
      int code = s.result();
      if (readError != null) {
        System.err.println("rdmamsg: send: reading standard input: " + readError.getMessage());
        return code == Main.OK ? Main.FAILURE : code;
      }
      return code;
    }
  }

  /** One message per line of {@code in} (without its newline); false once a send failed. */
  private boolean sendLines(InputStream in) throws IOException {
    byte[] block = new byte[1 << 20];
    byte[] line = new byte[1 << 16];
    int lineLength = 0;
    for (int n; (n = in.read(block)) > 0;) {
      int from = 0;
      for (int i = 0; i < n; i++) {
        if (block[i] != '\n') continue;
        line = append(line, lineLength, block, from, i - from);
        lineLength += i - from;
        if (!send(ByteBuffer.wrap(line, 0, lineLength))) return false;
        lineLength = 0;
        from = i + 1;
      }
      line = append(line, lineLength, block, from, n - from);
      lineLength += n - from;
    }
    return lineLength == 0 || send(ByteBuffer.wrap(line, 0, lineLength)); // a last line without '\n'
  }

  private static byte[] append(byte[] to, int used, byte[] from, int at, int n) {
    if (used + n > to.length) {
      byte[] bigger = new byte[Math.max(to.length * 2, used + n)];
      System.arraycopy(to, 0, bigger, 0, used);
      to = bigger;
    }
    System.arraycopy(from, at, to, used, n);
    return to;
  }

  private boolean send(ByteBuffer payload) {
    while (client.inFlight() >= window) {
      if (!awaitOne()) return false;
    }
    try {
      client.send(node, service, payload);
      ++sent;
      return true;
    } catch (RdmamsgException e) {
      return fail(e, sent + 1);
    }
  }

  /**
   * Waits for the completion of every message sent. After a failure the
   * others in flight are collected too, so that the report is complete; a
   * lost daemon answers nothing more.
   */
  private void finish() {
    while (confirmed + failed < sent && connected) awaitOne();
  }

  private boolean awaitOne() {
    Completion c;
    try {
      c = client.waitCompletion(timeout);
      if (c == null) {
        throw new RdmamsgException(Errc.TIMEOUT, "no confirmation from rdmamsgd in "
            + timeout.toSeconds() + " s");
      }
    } catch (RdmamsgException e) {
      connected = false; // no answer at all: nothing more will come
      return fail(e, 0);
    }
    if (!c.ok()) {
      ++failed;
      return fail(new RdmamsgException(c.errc(), c.message()), c.msgId());
    }
    ++confirmed;
    if (c.msgId() == prefix + 1) {
      ++prefix;
      while (!confirmedAhead.isEmpty() && confirmedAhead.first() == prefix + 1) {
        confirmedAhead.pollFirst();
        ++prefix;
      }
    } else {
      confirmedAhead.add(c.msgId());
    }
    return true;
  }

  private boolean fail(RdmamsgException e, long msgId) {
    if (failure == null) {
      failure = e;
      failedId = msgId;
    }
    return false;
  }

  private int result() {
    if (failure == null) return Main.OK;
    System.err.println("rdmamsg: send to " + node + "/" + service + " failed"
        + (failedId != 0 ? " (message " + failedId + ")" : "") + ": " + failure.getMessage());
    report();
    return Main.exitFor(failure.errc());
  }

  /** What is known after a failure: the confirmed run, the first message not confirmed. */
  private void report() {
    long firstOpen = prefix + 1;
    String first;
    if (firstOpen == failedId) {
      first = "failed (" + failure.errc() + ")";
    } else if (firstOpen <= sent) {
      first = "has no known outcome";
    } else {
      first = "was not sent";
    }
    String run = prefix == 0 ? "" : "messages 1-" + prefix + " all were; ";
    StringBuilder b = new StringBuilder("rdmamsg: ").append(confirmed).append(" of ").append(sent)
        .append(" messages sent were confirmed; ").append(run).append("message ").append(firstOpen)
        .append(' ').append(first);
    if (!confirmedAhead.isEmpty()) {
      b.append("; ").append(confirmedAhead.size()).append(" later messages were confirmed too"
          + " (resending from ").append(firstOpen).append(" repeats them)");
    }
    System.err.println(b);
  }
}
