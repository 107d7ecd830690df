package org.rdmamsg;

import java.nio.ByteBuffer;
import java.nio.channels.SelectableChannel;
import java.nio.channels.Selector;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;
import java.util.function.Supplier;

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
 * <h2>Subjects</h2>
 * What is {@linkplain #publish published} to a subject comes, from {@code
 * receive}, to every {@linkplain #subscribe subscription} whose pattern
 * matches it (to one member of a queue group), and its completion counts
 * them; {@link #requestAndWait} returns a request's first {@link #reply}.
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

  // The client's parts. It calls them; they never call it. Each is guarded by
  // the engine's lock, which every method below takes.
  private final String socketPath;
  private final Handshake handshake = new Handshake();
  private final Completions completions = new Completions();
  private final ReceiveQueue inbox = new ReceiveQueue();
  private final Holds holds = new Holds();
  private final Requests registers = new Requests();
  private final Requests statuses = new Requests();
  private final Subscriptions subscriptions = new Subscriptions();
  private final SocketTransport transport;
  private final IoEngine engine;
  private final Sender sender;
  private final Receiver receiver;
  private final Subjects subjects;

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
    final long deadline = Deadline.after(options.timeout());
    Client c = new Client(path, deadline);
    c.handshake.perform(c.engine, c.transport.out(), options.clientName(), deadline, path);
    if (options.ioThread()) c.engine.startIoThread("rdmamsg-io " + path);
    return c;
  }

  private Client(String socketPath, long deadline) throws RdmamsgException {
    this.socketPath = socketPath;
    Inbound inbound =
        new Inbound(handshake, inbox, completions, holds, registers, statuses, subscriptions);
    this.transport = SocketTransport.connect(socketPath, deadline, inbound, handshake::maxBody);
    this.engine = new IoEngine(transport, inbox, completions);
    this.sender = new Sender(engine, transport, handshake, holds, completions);
    this.receiver = new Receiver(engine, inbox);
    this.subjects = new Subjects(engine, transport, handshake, sender, receiver, inbox,
        completions, subscriptions);
  }

  // --- what the daemon said -------------------------------------------------------------

  /** The daemon's node name, from its WELCOME. */
  public String nodeName() {
    return handshake.nodeName();
  }

  /** The largest payload the daemon accepts, in bytes. */
  public int maxMessageSize() {
    return handshake.maxMessage();
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
    Names.check("service", service);
    locked(() -> registers.ask(engine, transport.out(),
        out -> Frames.serviceFrame(out, Frames.REGISTER, service), timeout,
        "no answer from rdmamsgd to registering " + service + " in time"));
  }

  /** Stops receiving for {@code service} (no reply; messages already queued may still come). */
  public void unregister(String service) throws RdmamsgException {
    Names.check("service", service);
    locked(() -> {
      engine.ensureOpen();
      Frames.serviceFrame(transport.out(), Frames.UNREGISTER, service);
      engine.writeNow();
      return null;
    });
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
    DrivenFuture<Completion> f = new DrivenFuture<>(engine);
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
    DrivenFuture<Completion> f = new DrivenFuture<>(engine);
    long id = queueSend(node, service, payload, "", true, f);
    if (!engine.driveUntil(f::isDone, Deadline.after(timeout))) {
      throw new RdmamsgException(Errc.TIMEOUT, "no completion for message " + id + " in time");
    }
    return f.join();
  }

  private long queueSend(String node, String service, ByteBuffer payload, String fromService,
      boolean mayWait, CompletableFuture<Completion> future) throws RdmamsgException {
    engine.lock();
    try {
      return sender.send(node, service, payload, fromService, mayWait, future);
    } finally {
      engine.unlock();
    }
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
    lockedGet(() -> {
      completions.setListener(listener);
      return null;
    });
  }

  /** The next completion if one is there (after a nonblocking read), else null. */
  public Completion pollCompletion() throws RdmamsgException {
    return locked(() -> {
      if (completions.isEmpty() && engine.failure() == null) engine.pumpNow();
      Completion c = completions.poll();
      if (c == null) engine.ensureOpen();
      return c;
    });
  }

  /** Waits up to {@code timeout} for the next completion; null if none came. */
  public Completion waitCompletion(Duration timeout) throws RdmamsgException {
    return locked(() -> {
      try {
        if (!engine.await(() -> !completions.isEmpty(), Deadline.after(timeout))) return null;
        return completions.poll();
      } catch (RdmamsgException e) {
        Completion c = completions.poll(); // those that came before the loss are still handed out
        if (c == null) throw e;
        return c;
      }
    });
  }

  /** Messages sent whose completion has not come yet. */
  public long inFlight() {
    return lockedGet(completions::inFlight);
  }

  /** Whether the daemon holds {@code node/service}: {@code trySend} to it would block. */
  public boolean isHeld(String node, String service) {
    return lockedGet(() -> holds.isHeld(node, service));
  }

  // --- receiving ------------------------------------------------------------------------

  /** Waits until a message comes (or the connection is lost). */
  public Message receive() throws RdmamsgException {
    return locked(() -> receiver.receiveUntil(Deadline.FOREVER));
  }

  /** Waits up to {@code timeout} for a message; null if none came. */
  public Message receive(Duration timeout) throws RdmamsgException {
    return locked(() -> receiver.receiveUntil(Deadline.after(timeout)));
  }

  /** The next message if one is there (after a nonblocking read), else null. */
  public Message tryReceive() throws RdmamsgException {
    return locked(receiver::tryReceive);
  }

  /** Messages read from the daemon and not returned by {@code receive} yet. */
  public int available() {
    return lockedGet(inbox::size);
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
    lockedGet(() -> {
      inbox.setConfirmOnReceive(on);
      return null;
    });
  }

  /**
   * Every message returned so far counts as taken: the daemon confirms them
   * to their senders. Needed only after {@code setConfirmOnReceive(false)}.
   */
  public void confirmReceived() throws RdmamsgException {
    locked(() -> {
      receiver.confirmReceived();
      return null;
    });
  }

  // --- subjects ---------------------------------------------------------------------------

  /** {@link #subscribe(String, SubscribeOptions)} with the default options. */
  public long subscribe(String pattern) throws RdmamsgException {
    return subscribe(pattern, SubscribeOptions.defaults());
  }

  /**
   * Subscribes to the subjects {@code pattern} matches: tokens separated by
   * dots, {@code *} for any one token, {@code >} as the last for one or more
   * ({@code orders.*.eu}, {@code orders.>}). Messages published to them come
   * from {@code receive} with this {@link Message#subscription()}. Waits up
   * to 5 s for the daemon's answer.
   *
   * @return the subscription's id: 1, 2, 3, ... per client
   * @throws RdmamsgException {@code bad_request} for an invalid pattern or
   *     queue group, {@code busy} past the daemon's {@code max_subscriptions},
   *     {@code permission_denied} by its {@code local_policy}, {@code timeout}
   */
  public long subscribe(String pattern, SubscribeOptions options) throws RdmamsgException {
    return locked(() -> subjects.subscribe(pattern, options, Duration.ofSeconds(5)));
  }

  /**
   * Gives a subscription up (no reply; messages already sent may still come).
   *
   * @throws RdmamsgException {@code bad_request} if it is not one of this client's
   */
  public void unsubscribe(long subscription) throws RdmamsgException {
    locked(() -> {
      subjects.unsubscribe(subscription);
      return null;
    });
  }

  /**
   * Queues a publish of {@code payload}'s remaining bytes to {@code subject};
   * its id (from the ids of {@code send}). Never waits for delivery. Its
   * {@link Completion} comes once every subscription it matched took or
   * dropped it, with the counts: {@code ok}, {@code no_subscribers}, {@code
   * timeout}, {@code peer_unreachable} or {@code permission_denied}.
   *
   * @throws RdmamsgException {@code bad_request} for an invalid subject (a
   *     wildcard too), {@code too_large}, using no id
   */
  public long publish(String subject, ByteBuffer payload) throws RdmamsgException {
    return locked(() -> subjects.publish(subject, payload));
  }

  /** {@link #publish(String, ByteBuffer)} with the bytes of an array. */
  public long publish(String subject, byte[] payload) throws RdmamsgException {
    return publish(subject, ByteBuffer.wrap(payload));
  }

  /**
   * Queues a request to {@code subject} and returns its id, as {@code
   * publish}. Its subscribers get it with a {@link Message#replyTo()}; the
   * first {@link #reply} comes from {@code receive} as a message whose {@link
   * Message#requestId()} is this id. Without a reply within {@code timeout}, a
   * {@link Completion} for the id says why: {@code no_responders}, {@code
   * timeout}, {@code peer_unreachable}.
   *
   * @throws RdmamsgException as {@code publish}; {@code bad_request} for a
   *     timeout outside 1 ms to 2^32 - 1 ms
   */
  public long request(String subject, byte[] payload, Duration timeout) throws RdmamsgException {
    return locked(() -> subjects.request(subject, ByteBuffer.wrap(payload), timeout));
  }

  /**
   * Sends a request as {@link #request} and waits for its reply, which it
   * returns; other messages stay queued for {@code receive}.
   *
   * @throws RdmamsgException why no reply came: {@code no_responders},
   *     {@code timeout}, {@code peer_unreachable}; or as {@code request}
   */
  public Message requestAndWait(String subject, byte[] payload, Duration timeout)
      throws RdmamsgException {
    return locked(() -> subjects.requestAndWait(subject, ByteBuffer.wrap(payload), timeout));
  }

  /**
   * Queues the reply to {@code request}, a message received with a {@link
   * Message#replyTo()}, and returns its id, from the ids of {@code send}. Its
   * {@link Completion} is {@code ok} once the requester took it, or why not
   * ({@code unknown_service} when the request was answered already or expired).
   *
   * @throws RdmamsgException {@code bad_request} for a message without a
   *     reply token, {@code too_large}, using no id
   */
  public long reply(Message request, byte[] payload) throws RdmamsgException {
    return locked(() -> subjects.reply(request, ByteBuffer.wrap(payload)));
  }

  // --- status, flushing, event loops, closing ---------------------------------------------

  /** {@link #status(Duration)} with a 5 s timeout. */
  public String status() throws RdmamsgException {
    return status(Duration.ofSeconds(5));
  }

  /** The daemon's status: its node, peers and services, as JSON text (docs/protocol.md). */
  public String status(Duration timeout) throws RdmamsgException {
    return (String) locked(() -> statuses.ask(engine, transport.out(), Frames::statusRequest,
        timeout, "no status from rdmamsgd in time"));
  }

  /** Writes everything queued, reading meanwhile; waits until done or the connection is lost. */
  public void flush() throws RdmamsgException {
    locked(() -> engine.await(() -> transport.unwritten() == 0, Deadline.FOREVER));
  }

  /**
   * Writes everything queued within {@code timeout}, reading meanwhile.
   *
   * @throws RdmamsgException {@code timeout} if bytes are still unwritten then
   */
  public void flush(Duration timeout) throws RdmamsgException {
    if (!locked(() -> engine.await(() -> transport.unwritten() == 0, Deadline.after(timeout)))) {
      throw new RdmamsgException(Errc.TIMEOUT,
          lockedGet(transport::unwritten) + " bytes are waiting for rdmamsgd to read them");
    }
  }

  /** The socket, nonblocking, for registration with an application's {@link Selector}. */
  public SelectableChannel channel() {
    return transport.channel();
  }

  /** Whether bytes are waiting to be written: watch {@link #channel()} for {@code OP_WRITE}. */
  public boolean wantsWrite() {
    return lockedGet(() -> transport.unwritten() > 0);
  }

  /** Nonblocking: writes what the socket takes, reads and handles what is there. */
  public void processIo() throws RdmamsgException {
    locked(() -> {
      engine.ensureOpen();
      engine.pumpNow();
      engine.ensureOpen();
      return null;
    });
  }

  /** Whether the connection is open. */
  public boolean isOpen() {
    return lockedGet(() -> engine.failure() == null);
  }

  /** The error that closed the connection, or null while it is open. */
  public RdmamsgException connectionError() {
    return lockedGet(engine::failure);
  }

  /**
   * Says goodbye (best effort, never waiting) and closes. Messages returned
   * count as taken (with confirmation on receive); messages still queued for
   * this client are not taken, and the daemon fails them back to their
   * senders. Idempotent.
   */
  @Override
  public void close() {
    engine.lock();
    try {
      if (engine.failure() != null) return;
      engine.reportConsumed();
      Frames.bye(transport.out());
      engine.writeSome();
      engine.lose(new RdmamsgException(Errc.NOT_CONNECTED, "connection closed by the client"));
    } finally {
      engine.unlock();
    }
  }

  // --- calls under the lock ---------------------------------------------------------------

  /** A call into the client's parts. */
  private interface Call<T> {
    T run() throws RdmamsgException;
  }

  private <T> T locked(Call<T> call) throws RdmamsgException {
    engine.lock();
    try {
      return call.run();
    } finally {
      engine.unlock();
    }
  }

  private <T> T lockedGet(Supplier<T> call) {
    engine.lock();
    try {
      return call.get();
    } finally {
      engine.unlock();
    }
  }
}
