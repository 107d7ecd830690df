package org.rdmamsg.conformance;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.rdmamsg.Client;
import org.rdmamsg.Completion;
import org.rdmamsg.ConnectOptions;
import org.rdmamsg.Message;
import org.rdmamsg.RdmamsgException;
import org.rdmamsg.SlowConsumer;
import org.rdmamsg.SubscribeOptions;

/**
 * The conformance driver for the Java client (org.rdmamsg.Client): reads
 * commands on stdin, one per line, and answers each on stdout as
 * tests/conformance/README.md describes.
 */
public final class Driver {
  private static final Duration FILL_TIME = Duration.ofSeconds(20);
  private static final Duration FLUSH_TIME = Duration.ofSeconds(10);
  private static final HexFormat HEX = HexFormat.of();

  private final Map<String, Client> clients = new HashMap<>();
  // Per client: the ids it published (their completions are printed as pubdone), and the
  // last message it received with a reply token (what `reply` answers) or else the last one.
  private final Map<String, Set<Long>> published = new HashMap<>();
  private final Map<String, Message> lastRequest = new HashMap<>();
  private final PrintStream out =
      new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), false,
          StandardCharsets.UTF_8);

  private Driver() {}

  public static void main(String[] args) throws IOException {
    new Driver().loop();
  }

  private void loop() throws IOException {
    BufferedReader in =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    for (String text; (text = in.readLine()) != null;) {
      String[] words = text.trim().split(" +");
      if (words.length < 2) continue;
      String[] a = new String[words.length - 2];
      System.arraycopy(words, 2, a, 0, a.length);
      try {
        run(words[0], words[1], a);
      } catch (RdmamsgException e) {
        say("error " + reason(e));
      } catch (RuntimeException e) { // a malformed command
        say("error driver " + e);
      }
    }
    for (Client c : clients.values()) c.close();
  }

  private void say(String s) {
    out.print(s);
    out.print('\n');
    out.flush();
  }

  private static String arg(String s) {
    return s.equals("~") ? "" : s;
  }

  private static String field(String s) {
    return s.isEmpty() ? "~" : s;
  }

  private static String oneLine(String s) {
    return s.replace('\n', ' ').replace('\r', ' ');
  }

  private static ByteBuffer payload(String hex) {
    return ByteBuffer.wrap(bytes(hex));
  }

  private static byte[] bytes(String hex) {
    return hex.equals("~") ? new byte[0] : HEX.parseHex(hex);
  }

  private static SlowConsumer policy(String word) {
    return switch (word) {
      case "drop" -> SlowConsumer.DROP;
      case "block" -> SlowConsumer.BLOCK;
      default -> throw new IllegalArgumentException("policy " + word + " (drop or block)");
    };
  }

  private static String reason(RdmamsgException e) {
    return (e.errc() + " " + oneLine(e.detail())).strip();
  }

  private static String hex(Message m) {
    byte[] b = m.bytes();
    return b.length == 0 ? "~" : HEX.formatHex(b);
  }

  /** A received message as a line; one with a reply token is what `reply` answers next. */
  private String msg(String name, Message m) {
    if (!m.replyTo().isEmpty() || !lastRequest.containsKey(name)
        || lastRequest.get(name).replyTo().isEmpty()) {
      lastRequest.put(name, m);
    }
    if (m.subscription() != 0) {
      return "submsg " + Long.toUnsignedString(m.subscription()) + " " + field(m.srcNode()) + " "
          + field(m.subject()) + " " + field(m.replyTo()) + " " + hex(m);
    }
    return "msg " + field(m.srcNode()) + " " + field(m.srcService()) + " " + field(m.service())
        + " " + hex(m);
  }

  private String done(String name, Completion c) {
    Set<Long> pubs = published.get(name);
    if (pubs != null && pubs.remove(c.msgId())) {
      return ("pubdone " + Long.toUnsignedString(c.msgId()) + " " + c.errc() + " "
          + Integer.toUnsignedString(c.matched()) + " " + Integer.toUnsignedString(c.taken())
          + " " + Integer.toUnsignedString(c.dropped()) + " " + oneLine(c.message())).strip();
    }
    return ("done " + Long.toUnsignedString(c.msgId()) + " " + c.errc() + " "
        + oneLine(c.message())).strip();
  }

  private static String ids(List<Long> v) {
    StringBuilder b = new StringBuilder();
    for (long id : v) b.append(b.length() == 0 ? "" : ",").append(Long.toUnsignedString(id));
    return v.size() + " " + (v.isEmpty() ? "~" : b.toString());
  }

  private void run(String name, String verb, String[] a) throws RdmamsgException {
    if (verb.equals("connect")) {
      Client c = Client.connect(a[0], new ConnectOptions().clientName("conformance-" + name)
          .timeout(Duration.ofSeconds(5)));
      Client old = clients.put(name, c);
      if (old != null) old.close();
      published.put(name, new HashSet<>());
      lastRequest.remove(name);
      say("ok " + c.nodeName() + " " + c.maxMessageSize());
      return;
    }
    Client c = clients.get(name);
    if (c == null) {
      say("error driver no client " + name);
      return;
    }
    switch (verb) {
      case "register" -> {
        c.register(arg(a[0]));
        say("ok");
      }
      case "unregister" -> {
        c.unregister(arg(a[0]));
        say("ok");
      }
      case "send" -> {
        long id = c.send(arg(a[0]), arg(a[1]), payload(a[2]));
        say("id " + Long.toUnsignedString(id));
      }
      case "trysend" -> {
        long id = c.trySend(arg(a[0]), arg(a[1]), payload(a[2]));
        say(id == Client.WOULD_BLOCK ? "would_block" : "id " + Long.toUnsignedString(id));
      }
      case "sendn" -> sendN(c, a);
      case "fill" -> fill(c, a);
      case "flush" -> {
        c.flush(FLUSH_TIME);
        say("ok");
      }
      case "recv" -> {
        Message m = c.receive(Duration.ofMillis(Long.parseLong(a[0])));
        say(m == null ? "timeout" : msg(name, m));
      }
      case "take" -> take(name, c, a);
      case "completion" -> {
        Completion d = c.waitCompletion(Duration.ofMillis(Long.parseLong(a[0])));
        say(d == null ? "timeout" : done(name, d));
      }
      case "completions" -> completions(name, c, a);
      case "sub" -> {
        SubscribeOptions o = SubscribeOptions.defaults().withGroup(arg(a[1]))
            .withPolicy(policy(a[2])).withPendingLimit(Integer.parseUnsignedInt(a[3]));
        say("sub " + Long.toUnsignedString(c.subscribe(arg(a[0]), o)));
      }
      case "unsub" -> {
        c.unsubscribe(Long.parseUnsignedLong(a[0]));
        say("ok");
      }
      case "pub" -> {
        long id = c.publish(arg(a[0]), bytes(a[1]));
        published.get(name).add(id);
        say("id " + Long.toUnsignedString(id));
      }
      case "request" -> {
        Message r = c.requestAndWait(arg(a[0]), bytes(a[1]),
            Duration.ofMillis(Long.parseLong(a[2])));
        say("reply " + field(r.srcNode()) + " " + hex(r));
      }
      case "reply" -> {
        Message request = lastRequest.get(name);
        if (request == null) {
          say("error driver no message received to reply to");
          return;
        }
        say("id " + Long.toUnsignedString(c.reply(request, bytes(a[0]))));
      }
      case "inflight" -> say("inflight " + c.inFlight());
      case "io" -> {
        c.processIo();
        say("ok");
      }
      case "close" -> {
        clients.remove(name).close();
        say("ok");
      }
      default -> say("error driver unknown command " + verb);
    }
  }

  private void sendN(Client c, String[] a) {
    List<Long> sent = new ArrayList<>();
    int count = Integer.parseInt(a[2]);
    try {
      for (int i = 0; i < count; i++) sent.add(c.send(arg(a[0]), arg(a[1]), arg(a[3]) + i));
    } catch (RdmamsgException e) {
      say("sent " + ids(sent) + " " + reason(e));
      return;
    }
    say("sent " + ids(sent));
  }

  private void fill(Client c, String[] a) throws RdmamsgException {
    ByteBuffer p = payload(a[2]);
    int max = Integer.parseInt(a[3]);
    long deadline = System.nanoTime() + FILL_TIME.toNanos();
    List<Long> accepted = new ArrayList<>();
    while (accepted.size() < max && System.nanoTime() - deadline < 0) {
      long id = c.trySend(arg(a[0]), arg(a[1]), p);
      if (id == Client.WOULD_BLOCK) {
        say("blocked " + ids(accepted));
        return;
      }
      accepted.add(id);
      c.processIo();
    }
    say("unblocked " + ids(accepted));
  }

  private void take(String name, Client c, String[] a) {
    int max = Integer.parseInt(a[0]);
    Duration idle = Duration.ofMillis(Long.parseLong(a[1]));
    int n = 0;
    try {
      for (Message m; n < max && (m = c.receive(idle)) != null; n++) say(msg(name, m));
    } catch (RdmamsgException e) {
      say("end " + n + " " + reason(e));
      return;
    }
    say("end " + n);
  }

  private void completions(String name, Client c, String[] a) {
    int max = Integer.parseInt(a[0]);
    long deadline = System.nanoTime() + Duration.ofMillis(Long.parseLong(a[1])).toNanos();
    int n = 0;
    try {
      while (n < max) {
        long left = deadline - System.nanoTime();
        if (left <= 0) break;
        Completion d = c.waitCompletion(Duration.ofNanos(left));
        if (d == null) break;
        say(done(name, d));
        n++;
      }
    } catch (RdmamsgException e) {
      say("end " + n + " " + reason(e));
      return;
    }
    say("end " + n);
  }
}
