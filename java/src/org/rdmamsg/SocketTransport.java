package org.rdmamsg;

import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SelectableChannel;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;
import java.util.concurrent.TimeUnit;
import java.util.function.IntSupplier;

/**
 * The Unix socket to the daemon and the bytes that cross it: the frames
 * queued to go out ({@link #out()}, where the client encodes them), the bytes
 * read and not decoded yet, and the decoder that hands each complete frame to
 * the client's {@link Frames.Handler}. Nonblocking throughout; the only wait
 * is {@link #select}.
 *
 * <p>A failure throws the {@link RdmamsgException} that ends the connection;
 * the caller closes the transport. When a write fails, what the daemon said
 * before it closed (an ERROR such as shutting_down) is read first and is the
 * reason. Not thread-safe, except {@link #wakeup()}; the client guards it.
 */
final class SocketTransport {
  static final int READ_CHUNK = 256 * 1024;
  static final int DIRECT_WRITE_MIN = 64 * 1024; // direct payloads of this size go straight out

  private final SocketChannel channel;
  private final Selector selector;
  private final SelectionKey key;
  private final ByteQueue in = new ByteQueue(READ_CHUNK);
  private final ByteQueue out = new ByteQueue(READ_CHUNK);
  private final Frames.Decoder decoder;
  private final IntSupplier maxBody;

  /**
   * Connects to the daemon at {@code path} before {@code deadline} (a
   * nanoTime). Frames read go to {@code handler}; a frame body longer than
   * {@code maxBody} (asked before each frame) is a protocol error.
   */
  static SocketTransport connect(String path, long deadline, Frames.Handler handler,
      IntSupplier maxBody) throws RdmamsgException {
    SocketChannel ch = null;
    Selector sel = null;
    try {
      UnixDomainSocketAddress address;
      try {
        address = UnixDomainSocketAddress.of(path);
      } catch (IllegalArgumentException e) {
        throw new RdmamsgException(Errc.BAD_REQUEST, "invalid socket path " + path, e);
      }
      ch = SocketChannel.open(StandardProtocolFamily.UNIX);
      ch.configureBlocking(false);
      sel = Selector.open();
      if (!ch.connect(address)) {
        ch.register(sel, SelectionKey.OP_CONNECT);
        while (!ch.finishConnect()) {
          long left = deadline - System.nanoTime();
          if (left <= 0) {
            throw new RdmamsgException(Errc.TIMEOUT,
                "rdmamsgd at " + path + " is not accepting connections");
          }
          sel.select(Math.max(1, TimeUnit.NANOSECONDS.toMillis(left)));
          sel.selectedKeys().clear();
        }
      }
      SocketTransport t = new SocketTransport(ch, sel, handler, maxBody);
      ch = null; // the transport owns them now
      sel = null;
      return t;
    } catch (RdmamsgException e) {
      throw e;
    } catch (IOException e) {
      throw new RdmamsgException(Errc.IO_ERROR,
          "cannot connect to rdmamsgd at " + path + ": " + e.getMessage(), e);
    } finally {
      closeQuietly(ch);
      closeQuietly(sel);
    }
  }

  private SocketTransport(SocketChannel channel, Selector selector, Frames.Handler handler,
      IntSupplier maxBody) throws IOException {
    this.channel = channel;
    this.selector = selector;
    SelectionKey k = channel.keyFor(selector);
    if (k != null) {
      k.interestOps(SelectionKey.OP_READ);
    } else {
      k = channel.register(selector, SelectionKey.OP_READ);
    }
    this.key = k;
    this.decoder = new Frames.Decoder(handler);
    this.maxBody = maxBody;
  }

  /** The socket, nonblocking. */
  SelectableChannel channel() {
    return channel;
  }

  /** The frames queued to go out: encode into it, then {@link #write()}. */
  ByteQueue out() {
    return out;
  }

  /** Bytes queued and not written yet. */
  int unwritten() {
    return out.size();
  }

  /**
   * Queues a SEND frame. A large direct payload with nothing queued before it
   * goes out with its header in one gathering write, and only what the
   * socket did not take is copied.
   */
  void queueSend(long id, String node, String service, String fromService, ByteBuffer payload) {
    final int length = payload.remaining();
    if (payload.isDirect() && length >= DIRECT_WRITE_MIN && out.isEmpty()) {
      writeDirect(id, node, service, fromService, payload);
    } else {
      Frames.sendHeader(out, id, node, service, fromService, length);
      Frames.payload(out, payload);
    }
  }

  private void writeDirect(long id, String node, String service, String fromService,
      ByteBuffer payload) {
    Frames.sendHeader(out, id, node, service, fromService, payload.remaining());
    final int header = out.size();
    ByteBuffer body = payload.duplicate();
    long n;
    try {
      n = channel.write(new ByteBuffer[] {out.queued(), body});
    } catch (IOException e) {
      n = 0; // written with the rest, which reports the error
    }
    out.consume((int) Math.min(n, header));
    if (body.hasRemaining()) Frames.payload(out, body);
  }

  /** Writes what the socket takes now. */
  void write() throws RdmamsgException {
    try {
      while (!out.isEmpty()) {
        if (out.writeTo(channel) == 0) break;
      }
    } catch (IOException e) {
      // A daemon that closed the connection may have said why first (an ERROR
      // such as shutting_down): that is the reason, not the write.
      read();
      throw new RdmamsgException(Errc.IO_ERROR, "write to rdmamsgd: " + e.getMessage(), e);
    }
  }

  /** Reads what is there and hands every complete frame to the handler. */
  void read() throws RdmamsgException {
    try {
      for (;;) {
        int n = in.readFrom(channel, READ_CHUNK);
        if (n < 0) throw new RdmamsgException(Errc.NOT_CONNECTED, "rdmamsgd closed the connection");
        if (n == 0) return;
        decode();
      }
    } catch (RdmamsgException e) {
      throw e; // the connection ends for what the daemon sent
    } catch (IOException e) {
      throw new RdmamsgException(Errc.IO_ERROR, "read from rdmamsgd: " + e.getMessage(), e);
    }
  }

  private void decode() throws RdmamsgException {
    int n;
    while ((n = decoder.decode(in, maxBody.getAsInt())) > 0) in.consume(n);
  }

  /** Before {@link #select}: watch for reading, and for writing while bytes are queued. */
  void watch() {
    key.interestOps(SelectionKey.OP_READ | (out.isEmpty() ? 0 : SelectionKey.OP_WRITE));
  }

  /**
   * Waits up to {@code millis} (0: without a limit) until the socket is ready
   * as {@link #watch()} last asked, or {@link #wakeup()} is called. Touches
   * nothing but the selector: the caller may select without its lock.
   */
  void select(long millis) throws IOException {
    selector.select(millis);
    selector.selectedKeys().clear();
  }

  /** Ends a {@link #select} in another thread at once. Thread-safe. */
  void wakeup() {
    selector.wakeup();
  }

  /** Closes the socket; the selector stays until {@link #closeSelector()}. */
  void close() {
    key.cancel();
    closeQuietly(channel);
  }

  /** Closes the selector (once no thread selects any more). */
  void closeSelector() {
    closeQuietly(selector);
  }

  static void closeQuietly(AutoCloseable c) {
    if (c == null) return;
    try {
      c.close();
    } catch (Exception e) {
      // closing is best effort
    }
  }
}
