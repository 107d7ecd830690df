package org.rdmamsg.bench;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import org.rdmamsg.Client;
import org.rdmamsg.Completion;
import org.rdmamsg.ConnectOptions;
import org.rdmamsg.Message;
import org.rdmamsg.RdmamsgException;

/**
 * The Java client's side of {@code rdmamsg bench}, for comparing it with
 * the C++ client against the same {@code rdmamsg bench sink} / {@code bench
 * echo} on the other node (bench/java.sh, docs/performance.md):
 *
 * <pre>
 * java -cp rdmamsg.jar:rdmamsg-bench.jar org.rdmamsg.bench.Bench [--socket PATH]
 *     throughput NODE/SERVICE [--size B] [--count N] [--window W] [--warmup N] [--runs R]
 *     latency NODE/SERVICE [--size B] [--count N] [--warmup N] [--runs R]
 * </pre>
 *
 * <p>Each run prints one line of JSON. The warm-up (not measured) runs in
 * the same JVM first, so that the measured runs see compiled code.
 * Payloads start with the header the C++ tool writes (u64 sequence, u32
 * sender index, u32 magic, little-endian), so the sink checks their order
 * and the echo's replies are matched by sequence number.
 *
 * <p>throughput: one thread, the client's nonblocking calls: {@code
 * trySend} up to {@code --window} unacknowledged messages, then {@code
 * waitCompletion} and {@code pollCompletion} (as {@code rdmamsg bench
 * throughput}, which uses {@code trySend} and {@code poll}). The clock runs
 * from the first send to the last acknowledgement, which the sink's client
 * sends once it took the message. latency: one message outstanding; {@code
 * send}, {@code flush}, {@code receive} of the echo; completions counted by
 * a listener.
 */
public final class Bench {
  private static final int MAGIC = 0x31424d52; // "RMB1"
  private static final Duration WAIT = Duration.ofSeconds(30);

  private String socket = "";
  private String mode = "";
  private String node = "";
  private String service = "";
  private int size = 64;
  private long count = -1;
  private long warmup = -1;
  private int window = 65536;
  private int runs = 1;

  private Bench() {}

  public static void main(String[] args) throws Exception {
    Bench b = new Bench();
    if (!b.parse(args)) {
      System.err.println("usage: Bench [--socket PATH] throughput|latency NODE/SERVICE [--size B]"
          + " [--count N] [--window W] [--warmup N] [--runs R]");
      System.exit(2);
    }
    ConnectOptions options = new ConnectOptions().clientName("rdmamsg-bench-java");
    try (Client c = Client.connect(b.socket, options)) {
      if (b.mode.equals("throughput")) {
        b.throughput(c);
      } else {
        b.latency(c);
      }
    } catch (RdmamsgException e) {
      System.err.println("Bench: " + e.getMessage());
      System.exit(1);
    }
  }

  private boolean parse(String[] a) {
    for (int i = 0; i < a.length; i++) {
      String v = i + 1 < a.length ? a[i + 1] : null;
      switch (a[i]) {
        case "--socket" -> socket = v;
        case "--size" -> size = Integer.parseInt(v);
        case "--count" -> count = Long.parseLong(v);
        case "--window" -> window = Integer.parseInt(v);
        case "--warmup" -> warmup = Long.parseLong(v);
        case "--runs" -> runs = Integer.parseInt(v);
        default -> {
          if (mode.isEmpty()) {
            mode = a[i];
            continue;
          }
          int slash = a[i].indexOf('/');
          if (!node.isEmpty() || slash <= 0) return false;
          node = a[i].substring(0, slash);
          service = a[i].substring(slash + 1);
          continue;
        }
      }
      i++;
    }
    if (socket.equals("")) socket = Client.defaultSocketPath();
    if (mode.equals("throughput")) {
      if (count < 0) count = 1_000_000;
      if (warmup < 0) warmup = count;
    } else if (mode.equals("latency")) {
      if (count < 0) count = 100_000;
      if (warmup < 0) warmup = 20_000;
    } else {
      return false;
    }
    return !node.isEmpty() && size >= 16 && runs >= 1;
  }

  private ByteBuffer payload() {
    ByteBuffer p = ByteBuffer.allocate(size).order(ByteOrder.LITTLE_ENDIAN);
    Arrays.fill(p.array(), (byte) 0x5a);
    p.putInt(8, 0).putInt(12, MAGIC);
    return p;
  }

  // --- throughput ------------------------------------------------------------------------

  private void throughput(Client c) throws RdmamsgException {
    ByteBuffer p = payload();
    if (warmup > 0) stream(c, p, warmup);
    for (int r = 1; r <= runs; r++) {
      long t0 = System.nanoTime();
      long failed = stream(c, p, count);
      double s = (System.nanoTime() - t0) / 1e9;
      System.out.printf(Locale.ROOT, "{\"mode\": \"throughput\", \"client\": \"java\", \"run\": %d,"
          + " \"size\": %d, \"count\": %d, \"failed\": %d, \"elapsed_seconds\": %.6f,"
          + " \"msgs_per_second\": %.1f, \"mb_per_second\": %.2f}%n", r, size, count, failed, s,
          count / s, count * (double) size / s / 1e6);
      System.out.flush();
    }
  }

  /** Sends n messages (sequence 0 .. n-1: a new stream for the sink); the failures. */
  private long stream(Client c, ByteBuffer p, long n) throws RdmamsgException {
    long sent = 0;
    long done = 0;
    long failed = 0;
    while (done < n) {
      while (sent < n && sent - done < window) {
        p.putLong(0, sent);
        if (c.trySend(node, service, p) == Client.WOULD_BLOCK) break;
        sent++;
      }
      Completion x = c.waitCompletion(WAIT); // writes what is queued, reads
      if (x == null) throw new RdmamsgException(org.rdmamsg.Errc.TIMEOUT, "no completion in 30 s");
      for (; x != null; x = c.pollCompletion()) {
        done++;
        if (!x.ok()) {
          failed++;
          if (failed == 1) System.err.println("Bench: " + x);
        }
      }
    }
    return failed;
  }

  // --- latency ---------------------------------------------------------------------------

  private long acked;
  private long failedAcks;

  private void latency(Client c) throws RdmamsgException {
    String reply = "bench-reply-java-" + ProcessHandle.current().pid();
    c.register(reply);
    c.setCompletionListener(x -> {
      if (x.ok()) {
        acked++;
      } else {
        failedAcks++;
      }
    });
    ByteBuffer p = payload();
    long seq = 0;
    long[] rtts = new long[(int) count];
    for (long i = 0; i < warmup; i++) roundTrip(c, p, seq++);
    for (int r = 1; r <= runs; r++) {
      long stray = 0;
      long t0 = System.nanoTime();
      for (int i = 0; i < count; i++) {
        long t = System.nanoTime();
        stray += roundTrip(c, p, seq++);
        rtts[i] = System.nanoTime() - t;
      }
      double s = (System.nanoTime() - t0) / 1e9;
      long[] sorted = rtts.clone();
      Arrays.sort(sorted);
      double mean = Arrays.stream(sorted).average().orElse(0) / 1e3;
      System.out.printf(Locale.ROOT, "{\"mode\": \"latency\", \"client\": \"java\", \"run\": %d,"
          + " \"size\": %d, \"count\": %d, \"warmup\": %d, \"stray_replies\": %d,"
          + " \"failed\": %d, \"elapsed_seconds\": %.6f, \"rtt_us\": {\"p50\": %.1f, \"p99\": %.1f,"
          + " \"p99.9\": %.1f, \"mean\": %.1f, \"min\": %.1f, \"max\": %.1f}}%n", r, size, count,
          warmup, stray, failedAcks, s, rank(sorted, 0.50), rank(sorted, 0.99),
          rank(sorted, 0.999), mean, sorted[0] / 1e3, sorted[sorted.length - 1] / 1e3);
      System.out.flush();
    }
  }

  /** Nearest rank, in microseconds (as the C++ tool). */
  private static double rank(long[] sorted, double q) {
    int i = (int) Math.ceil(q * sorted.length) - 1;
    return sorted[Math.max(0, Math.min(sorted.length - 1, i))] / 1e3;
  }

  /** One message to the echo and its reply back; the stray replies skipped. */
  private long roundTrip(Client c, ByteBuffer p, long seq) throws RdmamsgException {
    p.putLong(0, seq);
    c.send(node, service, p);
    c.flush(); // send() alone writes only once 64 KiB are queued
    long stray = 0;
    for (;;) {
      Message m = c.receive(WAIT);
      if (m == null) throw new RdmamsgException(org.rdmamsg.Errc.TIMEOUT, "no echo of " + seq);
      ByteBuffer b = m.payload().order(ByteOrder.LITTLE_ENDIAN);
      if (b.remaining() >= 16 && b.getInt(12) == MAGIC && b.getLong(0) == seq) return stray;
      stray++;
    }
  }
}
