package org.rdmamsg;

import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedSelectorException;
import java.nio.channels.SelectableChannel;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;

/**
 * A connection to the host's rdmamsgd over its Unix socket: the Java
 * counterpart of {@code rdmamsg::Client}, speaking the local protocol
 * (version 2) itself, without native code.
 *
 * <pre>{@code
 * try (Client client = Client.connect()) {                 // $RDMAMSG_SOCKET or the default
 *   client.register("orders");
 *   long id = client.send("beta", "billing", ByteBuffer.wrap(bytes));  // queued, never waits for delivery
 *   Completion done = client.waitCompletion(Duration.ofSeconds(5));   // ok, or why it failed
 *   Message m = client.receive(Duration.ofSeconds(1));                 // null if none came
 * }
 * }</pre>
 *
 * <h2>Sending</h2>
 * {@code send} queues a message and returns its id (1, 2, 3, ...) at once;
 * the daemon answers every message with exactly one {@link Completion}:
 * {@link Errc#OK} once the receiving application took it, or the reason it
 * failed. Completions are taken with {@link #pollCompletion()} /
 * {@link #waitCompletion(Duration)}, or go to a future ({@link #sendAsync})
 * or to a {@linkplain #setCompletionListener listener}. Sends are written in
 * batches: when 64 KiB are queued, or while the client waits for anything
 * ({@link #flush()}, {@code receive}, ...).
 *
 * <p>Backpressure is per destination: when the daemon holds a destination
 * (its listener does not keep up), {@code send} to it waits until the daemon
 * resumes it, reading meanwhile, and {@link #trySend trySend} returns
 * {@link #WOULD_BLOCK} without queuing; other destinations go on.
 *
 * <h2>Receiving</h2>
 * {@link #receive(Duration)} returns the messages addressed to the services
 * this client registered. A message counts as taken once {@code receive}
 * returned it: the client then tells the daemon (a cumulative CONSUMED), and
 * only then is the sender's message confirmed. After
 * {@link #setConfirmOnReceive setConfirmOnReceive(false)}, the application
 * says so itself with {@link #confirmReceived()}.
 *
 * <h2>Threads</h2>
 * A {@code Client} is thread-safe: any method may be called from any thread.
 * One thread at a time reads from and writes to the socket; blocking calls
 * of other threads wait for it to read what they wait for. Without an
 * {@linkplain ConnectOptions#ioThread(boolean) I/O thread} the client reads
 * only inside its calls; the futures of {@link #sendAsync} drive the client
 * themselves when waited on ({@code get}, {@code join}). Completion listeners
 * and futures are completed by the thread that read the completion, outside
 * the client's lock, never two at the same time.
 *
 * <h2>An application's own event loop</h2>
 * {@link #channel()} is nonblocking and may be registered with the
 * application's {@link Selector} for {@code OP_READ} (and {@code OP_WRITE}
 * while {@link #wantsWrite()}); on readiness, call {@link #processIo()} and
 * drain {@link #tryReceive()} and {@link #pollCompletion()}.
 *
 * <h2>Errors</h2>
 * Every failure is an {@link RdmamsgException} whose {@link Errc} names the
 * reason. Once the connection is lost, every call throws the error that
 * closed it, and the futures of messages in flight complete exceptionally
 * with it: their outcome is unknown.
 *
 * <p>The daemon's shared-memory transport is not used: version 2 of the
 * local protocol has none yet; every message goes over the socket.
 */
public final class Client implements AutoCloseable {
  /** The socket when {@code $RDMAMSG_SOCKET} is not set. */
  public static final String DEFAULT_SOCKET = "/run/rdmamsg/rdmamsgd.sock";

  /** What {@link #trySend trySend} returns when it queued nothing (message ids are never 0). */
  public static final long WOULD_BLOCK = 0;

  private static final int READ_CHUNK = 256 * 1024;
  private static final int WRITE_THRESHOLD = 64 * 1024; // send() writes once this much is queued
  private static final int WRITE_BLOCK_LIMIT = 4 << 20; // send() waits for the socket above this
  private static final int DIRECT_WRITE_MIN = 64 * 1024; // direct payloads go straight out
  private static final long FOREVER = Long.MAX_VALUE;

  private final SocketChannel channel;
  private final Selector selector;
  private final SelectionKey key;
  private final String socketPath;

  private final ReentrantLock lock = new ReentrantLock();
  private final Condition changed = lock.newCondition();
  private final ReentrantLock dispatchLock = new ReentrantLock();
  // Everything below is guarded by lock.
  private boolean ioBusy; // a thread is reading and writing (it may be in select, without the lock)
  private RdmamsgException failure; // null while connected
  private final ByteQueue in = new ByteQueue(READ_CHUNK);
  private final ByteQueue out = new ByteQueue(READ_CHUNK);
  private final Frames.Decoder decoder = new Frames.Decoder(new Inbound());
  private boolean welcomed;
  private String nodeName = "";
  private int maxMessage;
  private int maxBody = Frames.DEFAULT_MAX_BODY;
  private long nextId = 1;
  private long inFlight;
  private final ArrayDeque<Message> inbox = new ArrayDeque<>();
  private boolean confirmOnReceive = true;
  private long received; // messages handed to the application
  private long taken; // of those, the ones that count as taken
  private long consumedSent; // the last CONSUMED count sent
  private final CompletionQueue completions = new CompletionQueue();
  private final HashMap<Long, CompletableFuture<Completion>> futures = new HashMap<>();
  private Consumer<Completion> listener;
  // Completions for futures and the listener, handed out after the lock is released;
  // a null completion fails its future with `failure`.
  private ArrayList<CompletableFuture<Completion>> dispatchFutures = new ArrayList<>();
  private ArrayList<Completion> dispatchCompletions = new ArrayList<>();
  private final HashSet<String> held = new HashSet<>(); // "node/service" held by the daemon
  private final Requests registers = new Requests();
  private final Requests statuses = new Requests();
  private String checkedNode = "";
  private String checkedService = ""; // the last valid destination names

  // --- connecting ---------------------------------------------------------------------

  /** {@code $RDMAMSG_SOCKET} if set and not empty, else {@value #DEFAULT_SOCKET}. */
  public static String defaultSocketPath() {
    String env = System.getenv("RDMAMSG_SOCKET");
    return env != null && !env.isEmpty() ? env : DEFAULT_SOCKET;
  }

  /** Connects to {@link #defaultSocketPath()} with the default options. */
  public static Client connect() throws RdmamsgException {
    return connect(null, new ConnectOptions());
  }

  /** Connects to {@code socketPath} (null or empty: the default) with the default options. */
  public static Client connect(String socketPath) throws RdmamsgException {
    return connect(socketPath, new ConnectOptions());
  }

  /**
   * Connects to the daemon at {@code socketPath} (null or empty: the default)
   * and performs the handshake within {@code options}' timeout.
   *
   * @throws RdmamsgException {@code io_error} when there is no daemon there,
   *     {@code timeout} when it does not answer in time, {@code
   *     permission_denied} when its policy refuses this user, {@code
   *     protocol_error} when it speaks another protocol version
   */
  public static Client connect(String socketPath, ConnectOptions options)
      throws RdmamsgException {
    final String path = socketPath == null || socketPath.isEmpty() ? defaultSocketPath()
                                                                   : socketPath;
    final long deadline = deadlineAfter(options.timeout());
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
      Client c = new Client(ch, sel, path, options);
      ch = null; // the client owns them now
      sel = null;
      c.handshake(options.clientName(), deadline);
      if (options.ioThread()) c.startIoThread();
      return c;
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

  private Client(SocketChannel channel, Selector selector, String socketPath,
      ConnectOptions options) throws IOException {
    this.channel = channel;
    this.selector = selector;
    this.socketPath = socketPath;
    SelectionKey k = channel.keyFor(selector);
    if (k != null) {
      k.interestOps(SelectionKey.OP_READ);
    } else {
      k = channel.register(selector, SelectionKey.OP_READ);
    }
    this.key = k;
  }

  private void handshake(String clientName, long deadline) throws RdmamsgException {
    lock.lock();
    try {
      Frames.hello(out, clientName);
      if (!awaitLocked(() -> welcomed, deadline)) {
        lose(new RdmamsgException(Errc.TIMEOUT, "no WELCOME from rdmamsgd at " + socketPath
            + " in time"));
        throw failure;
      }
    } catch (RdmamsgException e) {
      lose(e);
      throw e;
    } finally {
      unlock();
    }
  }

  private void startIoThread() {
    Thread t = new Thread(() -> {
      lock.lock();
      try {
        awaitLocked(() -> false, FOREVER); // until the connection closes
      } catch (RdmamsgException e) {
        // closed: nothing more to read
      } finally {
        unlock();
      }
    }, "rdmamsg-io " + socketPath);
    t.setDaemon(true);
    t.start();
  }

  // --- what the daemon said -------------------------------------------------------------

  /** The daemon's node name, from its WELCOME. */
  public String nodeName() {
    return nodeName;
  }

  /** The largest payload the daemon accepts, in bytes. */
  public int maxMessageSize() {
    return maxMessage;
  }

  /** The socket this client is connected to. */
  public String socketPath() {
    return socketPath;
  }

  // --- services -------------------------------------------------------------------------

  /** {@link #register(String, Duration)} with a 5 s timeout. */
  public void register(String service) throws RdmamsgException {
    register(service, Duration.ofSeconds(5));
  }

  /**
   * Registers {@code service} on this node: messages addressed to it come to
   * this client. Waits for the daemon's answer.
   *
   * @throws RdmamsgException {@code duplicate_service} when another client
   *     (or this one) holds it, {@code bad_request} for an invalid name,
   *     {@code permission_denied}, {@code timeout}
   */
  public void register(String service, Duration timeout) throws RdmamsgException {
    checkName("service", service);
    lock.lock();
    try {
      ensureOpen();
      long n = registers.issue();
      Frames.serviceFrame(out, Frames.REGISTER, service);
      if (!awaitLocked(() -> registers.isAnswered(n), deadlineAfter(timeout))) {
        registers.abandon(n);
        throw new RdmamsgException(Errc.TIMEOUT, "no answer from rdmamsgd to registering "
            + service + " in time");
      }
      Object reply = registers.take(n);
      if (reply instanceof RdmamsgException e) {
        throw new RdmamsgException(e.errc(), e.detail());
      }
    } finally {
      unlock();
    }
  }

  /** Stops receiving for {@code service} (no reply; messages already queued may still come). */
  public void unregister(String service) throws RdmamsgException {
    checkName("service", service);
    lock.lock();
    try {
      ensureOpen();
      Frames.serviceFrame(out, Frames.UNREGISTER, service);
      writeNow();
    } finally {
      unlock();
    }
  }

  // --- sending --------------------------------------------------------------------------

  /**
   * Queues a message to {@code service} on {@code node} and returns its id.
   * Never waits for delivery; waits only while the daemon holds this
   * destination, or while more than 4 MiB are unwritten, reading meanwhile.
   * The payload's remaining bytes are sent; its position is not moved, and it
   * may be reused as soon as {@code send} returns.
   *
   * @throws RdmamsgException {@code too_large} above {@link #maxMessageSize()},
   *     {@code bad_request} for an invalid name, or the error that closed the connection
   */
  public long send(String node, String service, ByteBuffer payload) throws RdmamsgException {
    return queueSend(node, service, payload, "", true, null);
  }

  /**
   * The same, naming which of this client's registered services sends it
   * ({@code fromService}; empty: the first registered).
   */
  public long send(String node, String service, ByteBuffer payload, String fromService)
      throws RdmamsgException {
    return queueSend(node, service, payload, fromService, true, null);
  }

  /** {@link #send(String, String, ByteBuffer)} with the bytes of an array. */
  public long send(String node, String service, byte[] payload) throws RdmamsgException {
    return send(node, service, ByteBuffer.wrap(payload));
  }

  /** {@link #send(String, String, ByteBuffer)} with the UTF-8 bytes of {@code text}. */
  public long send(String node, String service, String text) throws RdmamsgException {
    return send(node, service, ByteBuffer.wrap(text.getBytes(StandardCharsets.UTF_8)));
  }

  /**
   * The same as {@code send}, never waiting: when the daemon holds this
   * destination, or more than 4 MiB are unwritten (the daemon is not reading
   * this client), nothing is queued and {@link #WOULD_BLOCK} is returned. For
   * applications that drive the client from their own event loop: call
   * {@link #processIo()} when {@link #channel()} is ready and try again.
   *
   * @return the message's id, or {@link #WOULD_BLOCK}
   */
  public long trySend(String node, String service, ByteBuffer payload) throws RdmamsgException {
    return queueSend(node, service, payload, "", false, null);
  }

  /** {@link #trySend(String, String, ByteBuffer)} from {@code fromService}. */
  public long trySend(String node, String service, ByteBuffer payload, String fromService)
      throws RdmamsgException {
    return queueSend(node, service, payload, fromService, false, null);
  }

  /**
   * Sends like {@code send} and returns a future of the message's
   * completion; the completion goes only to the future (not to
   * {@code pollCompletion} or the listener). The future's {@code get} and
   * {@code join} read from the daemon while they wait, also without an I/O
   * thread. If the connection is lost first, the future completes
   * exceptionally with the {@link RdmamsgException} that closed it.
   */
  public CompletableFuture<Completion> sendAsync(String node, String service, ByteBuffer payload)
      throws RdmamsgException {
    return sendAsync(node, service, payload, "");
  }

  /** {@link #sendAsync(String, String, ByteBuffer)} from {@code fromService}. */
  public CompletableFuture<Completion> sendAsync(String node, String service, ByteBuffer payload,
      String fromService) throws RdmamsgException {
    DrivenFuture<Completion> f = new DrivenFuture<>(this);
    queueSend(node, service, payload, fromService, true, f);
    return f;
  }

  /**
   * Sends one message and waits up to {@code timeout} for its completion.
   *
   * @throws RdmamsgException {@code timeout} when no completion came in time
   */
  public Completion sendAndWait(String node, String service, ByteBuffer payload,
      Duration timeout) throws RdmamsgException {
    DrivenFuture<Completion> f = new DrivenFuture<>(this);
    long id = queueSend(node, service, payload, "", true, f);
    if (!driveUntil(f::isDone, deadlineAfter(timeout))) {
      throw new RdmamsgException(Errc.TIMEOUT, "no completion for message " + id + " in time");
    }
    return f.join();
  }

  private long queueSend(String node, String service, ByteBuffer payload, String fromService,
      boolean mayWait, CompletableFuture<Completion> future) throws RdmamsgException {
    lock.lock();
    try {
      ensureOpen();
      checkDestination(node, service);
      if (!fromService.isEmpty()) checkName("service", fromService);
      final int length = payload.remaining();
      if (length > maxMessage) {
        throw new RdmamsgException(Errc.TOO_LARGE, "message of " + length
            + " bytes exceeds the maximum of " + maxMessage);
      }
      if (!held.isEmpty()) {
        String dest = node + "/" + service;
        if (held.contains(dest)) {
          if (!mayWait) return WOULD_BLOCK;
          awaitLocked(() -> !held.contains(dest), FOREVER);
        }
      }
      if (!mayWait && out.size() >= WRITE_BLOCK_LIMIT) {
        writeSome();
        if (out.size() >= WRITE_BLOCK_LIMIT) return WOULD_BLOCK;
      }
      final long id = nextId++;
      if (payload.isDirect() && length >= DIRECT_WRITE_MIN && out.isEmpty()) {
        writeDirect(id, node, service, fromService, payload);
      } else {
        Frames.sendHeader(out, id, node, service, fromService, length);
        Frames.payload(out, payload);
      }
      ++inFlight;
      if (future != null) futures.put(id, future);
      if (out.size() >= WRITE_THRESHOLD) {
        writeSome();
        if (!out.isEmpty()) readSome(); // not read: perhaps the daemon said why
      }
      wakeIo();
      if (mayWait && out.size() >= WRITE_BLOCK_LIMIT) {
        awaitLocked(() -> out.size() < WRITE_THRESHOLD, FOREVER);
      }
      return id;
    } finally {
      unlock();
    }
  }

  /** A large direct payload: header and payload in one gathering write, copying only the rest. */
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

  // --- completions ----------------------------------------------------------------------

  /**
   * Sends every completion that has no future to {@code listener} instead of
   * {@link #pollCompletion()}; null goes back to polling. The listener is
   * called by the thread that read the completion, outside the client's
   * lock, never concurrently; it should not block. Completions already
   * queued stay queued.
   */
  public void setCompletionListener(Consumer<Completion> listener) {
    lock.lock();
    try {
      this.listener = listener;
    } finally {
      unlock();
    }
  }

  /** The next completion if one is there (after a nonblocking read), else null. */
  public Completion pollCompletion() throws RdmamsgException {
    lock.lock();
    try {
      if (completions.isEmpty() && failure == null) pumpNow();
      Completion c = completions.poll();
      if (c == null) ensureOpen();
      return c;
    } finally {
      unlock();
    }
  }

  /** Waits up to {@code timeout} for the next completion; null if none came. */
  public Completion waitCompletion(Duration timeout) throws RdmamsgException {
    lock.lock();
    try {
      if (!awaitLocked(() -> !completions.isEmpty(), deadlineAfter(timeout))) return null;
      return completions.poll();
    } catch (RdmamsgException e) {
      Completion c = completions.poll(); // those that came before the loss are still handed out
      if (c == null) throw e;
      return c;
    } finally {
      unlock();
    }
  }

  /** Messages sent whose completion has not come yet. */
  public long inFlight() {
    lock.lock();
    try {
      return inFlight;
    } finally {
      unlock();
    }
  }

  /** Whether the daemon holds {@code node/service}: {@code trySend} to it would block. */
  public boolean isHeld(String node, String service) {
    lock.lock();
    try {
      return !held.isEmpty() && held.contains(node + "/" + service);
    } finally {
      unlock();
    }
  }

  // --- receiving ------------------------------------------------------------------------

  /** Waits until a message comes (or the connection is lost). */
  public Message receive() throws RdmamsgException {
    return receiveUntil(FOREVER);
  }

  /** Waits up to {@code timeout} for a message; null if none came. */
  public Message receive(Duration timeout) throws RdmamsgException {
    return receiveUntil(deadlineAfter(timeout));
  }

  /** The next message if one is there (after a nonblocking read), else null. */
  public Message tryReceive() throws RdmamsgException {
    lock.lock();
    try {
      if (inbox.isEmpty() && failure == null) pumpNow();
      if (inbox.isEmpty()) {
        ensureOpen();
        return null;
      }
      return takeMessage();
    } finally {
      unlock();
    }
  }

  /** Messages read from the daemon and not returned by {@code receive} yet. */
  public int available() {
    lock.lock();
    try {
      return inbox.size();
    } finally {
      unlock();
    }
  }

  /**
   * For applications that hand messages on before they count as taken (that
   * write them out first): with {@code false}, a message returned by
   * {@code receive} counts as taken only at the next {@link
   * #confirmReceived()}, which covers every message returned so far.
   * Messages never confirmed fail back to their senders when the connection
   * closes. The default is {@code true}: returned is taken.
   */
  public void setConfirmOnReceive(boolean on) {
    lock.lock();
    try {
      confirmOnReceive = on;
    } finally {
      unlock();
    }
  }

  /**
   * Every message returned so far counts as taken: the daemon confirms them
   * to their senders. Needed only after {@code setConfirmOnReceive(false)}.
   */
  public void confirmReceived() throws RdmamsgException {
    lock.lock();
    try {
      ensureOpen();
      taken = received;
      reportConsumed();
      writeNow();
    } finally {
      unlock();
    }
  }

  private Message receiveUntil(long deadline) throws RdmamsgException {
    lock.lock();
    try {
      try {
        if (!awaitLocked(() -> !inbox.isEmpty(), deadline)) return null;
      } catch (RdmamsgException e) {
        if (inbox.isEmpty()) throw e; // what came before the loss is still handed out
      }
      return takeMessage();
    } finally {
      unlock();
    }
  }

  private Message takeMessage() {
    Message m = inbox.poll();
    ++received;
    if (confirmOnReceive) taken = received;
    // Everything read is taken: say so now, so that the last message of a burst is
    // confirmed at once.
    if (inbox.isEmpty() && failure == null) {
      reportConsumed();
      writeNow();
    }
    return m;
  }

  // --- status, flushing, event loops, closing ---------------------------------------------

  /** {@link #status(Duration)} with a 5 s timeout. */
  public String status() throws RdmamsgException {
    return status(Duration.ofSeconds(5));
  }

  /** The daemon's status: its node, peers and services, as JSON text (docs/protocol.md). */
  public String status(Duration timeout) throws RdmamsgException {
    lock.lock();
    try {
      ensureOpen();
      long n = statuses.issue();
      Frames.statusRequest(out);
      if (!awaitLocked(() -> statuses.isAnswered(n), deadlineAfter(timeout))) {
        statuses.abandon(n);
        throw new RdmamsgException(Errc.TIMEOUT, "no status from rdmamsgd in time");
      }
      Object reply = statuses.take(n);
      if (reply instanceof RdmamsgException e) {
        throw new RdmamsgException(e.errc(), e.detail());
      }
      return (String) reply;
    } finally {
      unlock();
    }
  }

  /** Writes everything queued, reading meanwhile; waits until done or the connection is lost. */
  public void flush() throws RdmamsgException {
    lock.lock();
    try {
      awaitLocked(out::isEmpty, FOREVER);
    } finally {
      unlock();
    }
  }

  /**
   * Writes everything queued within {@code timeout}, reading meanwhile.
   *
   * @throws RdmamsgException {@code timeout} if bytes are still unwritten then
   */
  public void flush(Duration timeout) throws RdmamsgException {
    lock.lock();
    try {
      if (!awaitLocked(out::isEmpty, deadlineAfter(timeout))) {
        throw new RdmamsgException(Errc.TIMEOUT,
            out.size() + " bytes are waiting for rdmamsgd to read them");
      }
    } finally {
      unlock();
    }
  }

  /** The socket, nonblocking, for registration with an application's {@link Selector}. */
  public SelectableChannel channel() {
    return channel;
  }

  /** Whether bytes are waiting to be written: watch {@link #channel()} for {@code OP_WRITE}. */
  public boolean wantsWrite() {
    lock.lock();
    try {
      return !out.isEmpty();
    } finally {
      unlock();
    }
  }

  /** Nonblocking: writes what the socket takes, reads and handles what is there. */
  public void processIo() throws RdmamsgException {
    lock.lock();
    try {
      ensureOpen();
      pumpNow();
      ensureOpen();
    } finally {
      unlock();
    }
  }

  /** Whether the connection is open. */
  public boolean isOpen() {
    lock.lock();
    try {
      return failure == null;
    } finally {
      unlock();
    }
  }

  /** The error that closed the connection, or null while it is open. */
  public RdmamsgException connectionError() {
    lock.lock();
    try {
      return failure;
    } finally {
      unlock();
    }
  }

  /**
   * Says goodbye (best effort, never waiting) and closes. Messages returned
   * count as taken (with confirmation on receive); messages still queued for
   * this client are not taken, and the daemon fails them back to their
   * senders. Idempotent.
   */
  @Override
  public void close() {
    lock.lock();
    try {
      if (failure != null) return;
      reportConsumed();
      Frames.bye(out);
      writeSome();
      lose(new RdmamsgException(Errc.NOT_CONNECTED, "connection closed by the client"));
    } finally {
      unlock();
    }
  }

  // --- the I/O engine ---------------------------------------------------------------------

  /**
   * Waits until {@code done} holds or {@code deadline} (a nanoTime; FOREVER)
   * passes: false then. Called with the lock held once. One waiting thread
   * at a time does the I/O (it selects without the lock); the others wait
   * for it on {@code changed}. Completions for futures and the listener are
   * handed out on the way, without the lock.
   */
  private boolean awaitLocked(BooleanSupplier done, long deadline) throws RdmamsgException {
    for (;;) {
      if (done.getAsBoolean()) return true;
      if (failure != null) throw failure;
      if (!dispatchCompletions.isEmpty()) {
        lock.unlock();
        try {
          dispatch();
        } finally {
          lock.lock();
        }
        continue;
      }
      final long left = deadline == FOREVER ? FOREVER : deadline - System.nanoTime();
      if (left <= 0) return false;
      if (Thread.currentThread().isInterrupted()) throw interrupted(null);
      if (ioBusy) {
        writeNow(); // what this thread queued (a request, CONSUMED) goes out now
        try {
          if (left == FOREVER) {
            changed.await();
          } else {
            changed.awaitNanos(left);
          }
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw interrupted(e);
        }
        continue;
      }
      ioBusy = true;
      try {
        pumpWaiting(done, left);
      } finally {
        ioBusy = false;
        changed.signalAll();
        if (failure != null) closeQuietly(selector);
      }
    }
  }

  /**
   * As the I/O thread: says what was consumed, writes, and unless that was
   * what {@code done} waits for, waits for the socket and reads.
   */
  private void pumpWaiting(BooleanSupplier done, long nanos) {
    reportConsumed(); // before it waits for input
    writeSome();
    if (failure != null || done.getAsBoolean()) return;
    try {
      key.interestOps(SelectionKey.OP_READ | (out.isEmpty() ? 0 : SelectionKey.OP_WRITE));
      final long ms = nanos == FOREVER ? 0 : Math.max(1, TimeUnit.NANOSECONDS.toMillis(nanos));
      lock.unlock();
      try {
        selector.select(ms);
      } finally {
        lock.lock();
      }
      selector.selectedKeys().clear();
    } catch (IOException | ClosedSelectorException | java.nio.channels.CancelledKeyException e) {
      if (failure == null) lose(new RdmamsgException(Errc.IO_ERROR, "poll: " + e, e));
      return;
    }
    pumpNow();
  }

  /** Nonblocking: writes what the socket takes and reads what is there. */
  private void pumpNow() {
    writeSome();
    readSome();
  }

  /** Writes what the socket takes now; wakes the thread in select for the rest. */
  private void writeNow() {
    writeSome(); // the thread in select does not touch the socket until it has the lock
    wakeIo();
  }

  /** Tells the thread in select that there is something to write. */
  private void wakeIo() {
    if (ioBusy && !out.isEmpty()) selector.wakeup();
  }

  private void writeSome() {
    try {
      while (!out.isEmpty() && failure == null) {
        if (out.writeTo(channel) == 0) break;
      }
    } catch (IOException e) {
      // A daemon that closed the connection may have said why first (an ERROR
      // such as shutting_down): that is the reason, not the write.
      readSome();
      lose(new RdmamsgException(Errc.IO_ERROR, "write to rdmamsgd: " + e.getMessage(), e));
    }
  }

  private void readSome() {
    try {
      while (failure == null) {
        int n = in.readFrom(channel, READ_CHUNK);
        if (n < 0) {
          lose(new RdmamsgException(Errc.NOT_CONNECTED, "rdmamsgd closed the connection"));
        } else if (n == 0) {
          return;
        } else {
          parse();
        }
      }
    } catch (IOException e) {
      lose(new RdmamsgException(Errc.IO_ERROR, "read from rdmamsgd: " + e.getMessage(), e));
    }
  }

  private void parse() {
    try {
      int n;
      while (failure == null && (n = decoder.decode(in, maxBody)) > 0) in.consume(n);
    } catch (RdmamsgException e) {
      lose(e);
    }
  }

  /** CONSUMED with everything taken, if the daemon has not heard it yet. */
  private void reportConsumed() {
    if (taken > consumedSent && failure == null) {
      Frames.consumed(out, taken);
      consumedSent = taken;
    }
  }

  private void lose(RdmamsgException why) {
    if (failure != null) return;
    failure = why;
    key.cancel();
    closeQuietly(channel);
    for (CompletableFuture<Completion> f : futures.values()) {
      dispatchFutures.add(f);
      dispatchCompletions.add(null);
    }
    futures.clear();
    changed.signalAll();
    selector.wakeup();
    if (!ioBusy) closeQuietly(selector);
  }

  /** A completion from the daemon: to its future, the listener, or the queue. */
  private void complete(long first, long count, Errc errc, String text) {
    inFlight -= Math.min(inFlight, count);
    if (futures.isEmpty() && listener == null) {
      completions.add(first, count, errc, text);
      return;
    }
    if (listener == null && count > futures.size()) {
      // A long range and a few futures: find those, queue the rest as ranges.
      long next = first;
      for (long id : futuresIn(first, count)) {
        if (id > next) completions.add(next, id - next, errc, text);
        dispatchFutures.add(futures.remove(id));
        dispatchCompletions.add(new Completion(id, errc, text));
        next = id + 1;
      }
      if (next - first < count) completions.add(next, count - (next - first), errc, text);
      return;
    }
    for (long i = 0; i < count; i++) {
      long id = first + i;
      CompletableFuture<Completion> f = futures.remove(id);
      if (f != null || listener != null) {
        dispatchFutures.add(f);
        dispatchCompletions.add(new Completion(id, errc, text));
      } else {
        completions.add(id, 1, errc, text);
      }
    }
  }

  /** The ids of futures in {@code first .. first + count - 1}, in order. */
  private long[] futuresIn(long first, long count) {
    return futures.keySet().stream().mapToLong(Long::longValue)
        .filter(id -> id - first >= 0 && id - first < count).sorted().toArray();
  }

  /** Releases the lock, then hands out the completions collected meanwhile. */
  private void unlock() {
    if (dispatchCompletions.isEmpty() || lock.getHoldCount() > 1) {
      lock.unlock();
      return;
    }
    lock.unlock();
    dispatch();
  }

  /** Hands out collected completions; called without the lock. */
  private void dispatch() {
    ArrayList<CompletableFuture<Completion>> fs;
    ArrayList<Completion> cs;
    Consumer<Completion> l;
    RdmamsgException why;
    dispatchLock.lock();
    try {
      lock.lock();
      try {
        fs = dispatchFutures;
        cs = dispatchCompletions;
        if (cs.isEmpty()) return;
        dispatchFutures = new ArrayList<>();
        dispatchCompletions = new ArrayList<>();
        l = listener;
        why = failure;
      } finally {
        lock.unlock();
      }
      RuntimeException thrown = null;
      for (int i = 0; i < cs.size(); i++) {
        CompletableFuture<Completion> f = fs.get(i);
        Completion c = cs.get(i);
        try {
          if (f == null) {
            if (l != null) l.accept(c);
          } else if (c == null) {
            f.completeExceptionally(why);
          } else {
            f.complete(c);
          }
        } catch (RuntimeException e) {
          if (thrown == null) thrown = e;
        }
      }
      if (thrown != null) throw thrown;
    } finally {
      dispatchLock.unlock();
    }
  }

  /** For futures: drives the I/O until {@code done} or the deadline; false at the deadline. */
  boolean driveUntil(BooleanSupplier done, long deadline) {
    lock.lock();
    try {
      return awaitLocked(done, deadline);
    } catch (RdmamsgException e) {
      return failure != null; // lost: the futures are failed with the reason; else interrupted
    } finally {
      unlock();
    }
  }

  // --- frames from the daemon -------------------------------------------------------------

  private final class Inbound implements Frames.Handler {
    @Override
    public void welcome(int maxMessageSize, String node) {
      nodeName = node;
      maxMessage = maxMessageSize;
      long body = Integer.toUnsignedLong(maxMessageSize) + Frames.MAX_FRAME_OVERHEAD;
      maxBody = (int) Math.min(Integer.MAX_VALUE - 16, Math.max(body, Frames.DEFAULT_MAX_BODY));
      if (maxMessage < 0) maxMessage = Integer.MAX_VALUE - Frames.MAX_FRAME_OVERHEAD - 16;
      welcomed = true;
    }

    @Override
    public void registered(String service) {
      if (!registers.answer(Boolean.TRUE)) unsolicited("REGISTERED " + service);
    }

    @Override
    public void deliver(String srcNode, String srcService, String toService, ByteBuffer buf,
        int offset, int length) {
      byte[] payload = new byte[length];
      buf.get(offset, payload);
      inbox.add(new Message(srcNode, srcService, toService, ByteBuffer.wrap(payload)));
    }

    @Override
    public void ack(long firstMsgId, long count) {
      complete(firstMsgId, count, Errc.OK, "");
    }

    @Override
    public void error(long msgId, Errc errc, int inReplyTo, String text) {
      if (msgId != 0) {
        complete(msgId, 1, errc, text);
        return;
      }
      RdmamsgException e = new RdmamsgException(errc, text);
      boolean expected = switch (inReplyTo) {
        case Frames.REGISTER -> registers.answer(e);
        case Frames.STATUS_REQUEST -> statuses.answer(e);
        default -> false;
      };
      if (!expected) lose(e); // connection-level: the daemon closes
    }

    @Override
    public void statusReply(String json) {
      if (!statuses.answer(json)) unsolicited("STATUS_REPLY");
    }

    @Override
    public void bye() {
      lose(new RdmamsgException(Errc.NOT_CONNECTED, "rdmamsgd said goodbye"));
    }

    @Override
    public void hold(String node, String service) {
      held.add(node + "/" + service);
    }

    @Override
    public void resume(String node, String service) {
      held.remove(node + "/" + service);
    }

    private void unsolicited(String what) {
      lose(new RdmamsgException(Errc.PROTOCOL_ERROR, "rdmamsgd sent " + what
          + " without a request"));
    }
  }

  // --- helpers ----------------------------------------------------------------------------

  private void ensureOpen() throws RdmamsgException {
    if (failure != null) throw failure;
  }

  private void checkDestination(String node, String service) throws RdmamsgException {
    // A stream names the same destination every time: it is checked once.
    // (The names remembered start empty, which is not a valid name: checked too.)
    if (!node.equals(checkedNode) || node.isEmpty()) {
      checkName("node", node);
      checkedNode = node;
    }
    if (!service.equals(checkedService) || service.isEmpty()) {
      checkName("service", service);
      checkedService = service;
    }
  }

  private static void checkName(String kind, String name) throws RdmamsgException {
    if (!Frames.isValidName(name)) {
      throw new RdmamsgException(Errc.BAD_REQUEST, "invalid " + kind + " name '" + name
          + "' (1-63 characters of A-Z a-z 0-9 . _ -)");
    }
  }

  static long deadlineAfter(Duration timeout) {
    long nanos;
    try {
      nanos = timeout.toNanos();
    } catch (ArithmeticException e) {
      return FOREVER;
    }
    if (nanos > FOREVER / 4) return FOREVER; // more than 73 years
    return System.nanoTime() + Math.max(0, nanos);
  }

  private static RdmamsgException interrupted(InterruptedException cause) {
    return new RdmamsgException(Errc.TIMEOUT, "interrupted while waiting for rdmamsgd", cause);
  }

  private static void closeQuietly(AutoCloseable c) {
    if (c == null) return;
    try {
      c.close();
    } catch (Exception e) {
      // closing is best effort
    }
  }
}
