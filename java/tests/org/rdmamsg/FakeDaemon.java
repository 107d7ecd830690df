package org.rdmamsg;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * A scripted daemon on a Unix socket, for the protocol's rules that a real
 * daemon never breaks on purpose: the test reads the client's frames and
 * writes the daemon's, byte for byte. Every wait has a deadline.
 */
final class FakeDaemon implements AutoCloseable {
  static final Duration WAIT = Duration.ofSeconds(10);

  /** A frame the client sent: its kind and body (little-endian). */
  record Frame(int version, int kind, ByteBuffer body) {
    long u64(int at) {
      return body.getLong(at);
    }

    /** The str8 at {@code at}. */
    String str8(int at) {
      byte[] b = new byte[body.get(at) & 0xff];
      body.get(at + 1, b);
      return new String(b, StandardCharsets.UTF_8);
    }
  }

  final Path dir;
  final Path socket;
  private final ServerSocketChannel server;
  private SocketChannel conn;
  private Selector selector;
  private boolean eof;
  private final ByteBuffer in = ByteBuffer.allocate(1 << 20).order(ByteOrder.LITTLE_ENDIAN);

  FakeDaemon() throws IOException {
    dir = Files.createTempDirectory("rdmamsg-java-fake-");
    socket = dir.resolve("fake.sock");
    server = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
    server.bind(UnixDomainSocketAddress.of(socket));
  }

  /** Connects a client in another thread, answers its HELLO, returns it. */
  Client connect(ConnectOptions options, int maxMessage) throws Exception {
    CompletableFuture<Client> client = CompletableFuture.supplyAsync(() -> {
      try {
        return Client.connect(socket.toString(), options);
      } catch (RdmamsgException e) {
        throw new RuntimeException(e);
      }
    });
    accept();
    assertEquals(Frames.HELLO, read().kind());
    welcome(maxMessage, "fake");
    return client.get(WAIT.toSeconds(), TimeUnit.SECONDS);
  }

  Client connect() throws Exception {
    return connect(new ConnectOptions(), 1 << 20);
  }

  void accept() throws IOException {
    server.configureBlocking(false);
    try (Selector s = Selector.open()) {
      server.register(s, SelectionKey.OP_ACCEPT);
      long deadline = System.nanoTime() + WAIT.toNanos();
      while ((conn = server.accept()) == null) {
        if (System.nanoTime() > deadline) fail("no client connected");
        s.select(100);
      }
    }
    conn.configureBlocking(false);
    selector = Selector.open();
    conn.register(selector, SelectionKey.OP_READ);
  }

  /** The next frame from the client; fails the test if none comes in time. */
  Frame read() throws IOException {
    Frame f = read(WAIT);
    if (f == null) fail("the client sent no frame in " + WAIT);
    return f;
  }

  /** The next frame, or null if none came within {@code wait} (or the client closed). */
  Frame read(Duration wait) throws IOException {
    long deadline = System.nanoTime() + wait.toNanos();
    for (;;) {
      if (in.position() >= 8) {
        int length = in.getInt(0);
        if (in.position() >= 8 + length) {
          ByteBuffer body = ByteBuffer.allocate(length).order(ByteOrder.LITTLE_ENDIAN);
          body.put(0, in, 8, length);
          Frame f = new Frame(in.get(4) & 0xff, in.get(5) & 0xff, body);
          in.flip().position(8 + length);
          in.compact();
          return f;
        }
      }
      long left = deadline - System.nanoTime();
      if (left <= 0) return null;
      selector.select(Math.max(1, TimeUnit.NANOSECONDS.toMillis(left)));
      selector.selectedKeys().clear();
      if (conn.read(in) < 0) {
        eof = true;
        return null;
      }
    }
  }

  /** True once the client closed its end (within the wait); frames before that are skipped. */
  boolean closedByClient() throws IOException {
    long deadline = System.nanoTime() + WAIT.toNanos();
    while (!eof && System.nanoTime() < deadline) read(Duration.ofMillis(100));
    return eof;
  }

  // --- daemon frames ---------------------------------------------------------------

  void frame(int version, int kind, byte[] body) throws IOException {
    ByteBuffer b = ByteBuffer.allocate(8 + body.length).order(ByteOrder.LITTLE_ENDIAN);
    b.putInt(body.length).put((byte) version).put((byte) kind).putShort((short) 0).put(body);
    b.flip();
    while (b.hasRemaining()) conn.write(b);
  }

  /** Several frames (kind, body, kind, body, ...) in one write: the client reads them together. */
  void frames(Object... kindsAndBodies) throws IOException {
    int size = 0;
    for (int i = 1; i < kindsAndBodies.length; i += 2) {
      size += 8 + ((byte[]) kindsAndBodies[i]).length;
    }
    ByteBuffer b = ByteBuffer.allocate(size).order(ByteOrder.LITTLE_ENDIAN);
    for (int i = 0; i < kindsAndBodies.length; i += 2) {
      byte[] body = (byte[]) kindsAndBodies[i + 1];
      b.putInt(body.length).put((byte) Frames.VERSION).put((byte) (int) kindsAndBodies[i])
          .putShort((short) 0).put(body);
    }
    b.flip();
    while (b.hasRemaining()) conn.write(b);
  }

  void frame(int kind, byte[] body) throws IOException {
    frame(Frames.VERSION, kind, body);
  }

  static byte[] body(Object... fields) {
    ByteBuffer b = ByteBuffer.allocate(1 << 16).order(ByteOrder.LITTLE_ENDIAN);
    for (Object f : fields) {
      if (f instanceof Long v) {
        b.putLong(v);
      } else if (f instanceof Integer v) {
        b.putInt(v);
      } else if (f instanceof Short v) {
        b.putShort(v);
      } else if (f instanceof Byte v) {
        b.put(v);
      } else if (f instanceof String s) { // str8
        byte[] t = s.getBytes(StandardCharsets.UTF_8);
        b.put((byte) t.length).put(t);
      } else if (f instanceof byte[] raw) {
        b.put(raw);
      } else {
        throw new IllegalArgumentException(String.valueOf(f));
      }
    }
    byte[] out = new byte[b.position()];
    b.flip().get(out);
    return out;
  }

  void welcome(int maxMessage, String node) throws IOException {
    frame(Frames.WELCOME, body(maxMessage, node));
  }

  void deliver(String srcNode, String srcService, String toService, String text)
      throws IOException {
    frame(Frames.DELIVER, body(srcNode, srcService, toService,
        text.getBytes(StandardCharsets.UTF_8)));
  }

  void ack(long first, int count) throws IOException {
    frame(Frames.ACK, body(1, first, count));
  }

  void error(long msgId, Errc errc, int inReplyTo, String text) throws IOException {
    byte[] t = text.getBytes(StandardCharsets.UTF_8);
    frame(Frames.ERROR, body(msgId, (short) errc.value(), (byte) inReplyTo, (short) t.length, t));
  }

  void hold(String node, String service) throws IOException {
    frame(Frames.HOLD, body(node, service));
  }

  void resume(String node, String service) throws IOException {
    frame(Frames.RESUME, body(node, service));
  }

  /** Closes the client's connection (the daemon went away). */
  void drop() throws IOException {
    conn.close();
  }

  /**
   * Closes the client's connection and releases its socket at once, as a
   * daemon that exits: the client's writes fail. (A channel registered with
   * a selector keeps its socket until that selector selects again; until
   * then the client reads the end of the stream, but its writes succeed.)
   */
  void hangUp() throws IOException {
    conn.close();
    selector.selectNow();
  }

  @Override
  public void close() throws IOException {
    if (selector != null) selector.close();
    if (conn != null) conn.close();
    server.close();
    Files.deleteIfExists(socket);
    Files.deleteIfExists(dir);
  }
}
