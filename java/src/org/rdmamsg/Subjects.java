package org.rdmamsg;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;

/**
 * Subjects (docs/protocol.md, "Subjects"): subscribing and giving a
 * subscription up, publishing, requests and their replies, and replying to
 * a request. What is checked here — subjects, patterns, queue groups, sizes,
 * timeouts, reply tokens — is refused with {@code bad_request} (or {@code
 * too_large}) before anything is queued and without using an id. Publishes,
 * requests and replies take their ids from the sends' sequence and go out
 * the same way ({@link Sender#queue}). Called under the client's lock.
 */
final class Subjects {
  /** How long {@code requestAndWait} waits past a request's timeout for the daemon's outcome. */
  static final Duration OUTCOME_GRACE = Duration.ofSeconds(5);
  private static final long MAX_TIMEOUT_MS = 0xffff_ffffL; // u32 timeoutMs

  private final IoEngine engine;
  private final SocketTransport transport;
  private final Handshake handshake;
  private final Sender sender;
  private final Receiver receiver;
  private final ReceiveQueue inbox;
  private final Completions completions;
  private final Subscriptions subscriptions;

  Subjects(IoEngine engine, SocketTransport transport, Handshake handshake, Sender sender,
      Receiver receiver, ReceiveQueue inbox, Completions completions,
      Subscriptions subscriptions) {
    this.engine = engine;
    this.transport = transport;
    this.handshake = handshake;
    this.sender = sender;
    this.receiver = receiver;
    this.inbox = inbox;
    this.completions = completions;
    this.subscriptions = subscriptions;
  }

  // --- subscriptions --------------------------------------------------------------------

  /**
   * Subscribes to {@code pattern} and waits for the daemon's answer; the
   * subscription's id. When no answer comes in time, the SUB is undone with
   * an UNSUB (should the daemon take it after all) and its answer dropped.
   */
  long subscribe(String pattern, SubscribeOptions options, Duration timeout)
      throws RdmamsgException {
    engine.ensureOpen();
    SubjectRules.checkPattern(pattern);
    if (!options.group().isEmpty()) Names.check("queue group", options.group());
    final long id = subscriptions.issue();
    SubjectFrames.sub(transport.out(), id, options.policy(), options.pendingLimit(),
        options.group(), pattern);
    boolean answered = false;
    try {
      answered = engine.await(() -> subscriptions.isAnswered(id), Deadline.after(timeout));
    } finally {
      if (!answered) subscriptions.abandon(id);
    }
    if (!answered) {
      SubjectFrames.unsub(transport.out(), id);
      engine.writeNow();
      throw new RdmamsgException(Errc.TIMEOUT, "no answer from rdmamsgd to subscribing to "
          + pattern + " in time");
    }
    if (subscriptions.take(id) instanceof RdmamsgException e) {
      throw new RdmamsgException(e.errc(), e.detail());
    }
    return id;
  }

  /** Gives subscription {@code id} up (no reply; messages already sent may still come). */
  void unsubscribe(long id) throws RdmamsgException {
    engine.ensureOpen();
    if (!subscriptions.remove(id)) {
      throw new RdmamsgException(Errc.BAD_REQUEST, "no subscription "
          + Long.toUnsignedString(id) + " on this client");
    }
    SubjectFrames.unsub(transport.out(), id);
    engine.writeNow();
  }

  // --- publishing and requests ----------------------------------------------------------

  /** Queues a publish to {@code subject}; its id. */
  long publish(String subject, ByteBuffer payload) throws RdmamsgException {
    return pub(subject, 0, payload, null, false);
  }

  /** Queues a request to {@code subject}; its id. */
  long request(String subject, ByteBuffer payload, Duration timeout) throws RdmamsgException {
    return pub(subject, timeoutMs(timeout), payload, null, false);
  }

  /**
   * Sends a request and waits for its outcome: the reply, taken out of the
   * receive queue (the messages before it stay there), or the reason it got
   * none thrown. The daemon answers by the request's deadline; should it not
   * within {@link #OUTCOME_GRACE} more, the outcome that comes later is handed
   * out as for {@link #request}.
   */
  Message requestAndWait(String subject, ByteBuffer payload, Duration timeout)
      throws RdmamsgException {
    final int ms = timeoutMs(timeout);
    final CompletableFuture<Completion> failed = new CompletableFuture<>();
    final long id = pub(subject, ms, payload, failed, true);
    Message reply = null;
    try {
      engine.await(() -> inbox.hasReply(id) || failed.isDone(),
          Deadline.after(Duration.ofMillis(Integer.toUnsignedLong(ms)).plus(OUTCOME_GRACE)));
      reply = receiver.takeReply(id);
      if (reply != null) return reply;
      if (!failed.isDone()) {
        throw new RdmamsgException(Errc.TIMEOUT, "no outcome of request "
            + Long.toUnsignedString(id) + " to " + subject + " from rdmamsgd in time");
      }
      Completion c;
      try {
        c = failed.join();
      } catch (CompletionException e) { // the connection was lost
        engine.ensureOpen();
        throw e;
      }
      throw new RdmamsgException(c.errc(), c.message());
    } finally {
      if (reply == null) {
        inbox.stopAwaiting(id);
        completions.forgetFuture(id);
      }
    }
  }

  /**
   * Queues a PUB; {@code future} (if not null) gets its PUB_ACK, and with
   * {@code keepReply} its reply is kept for {@link #requestAndWait}.
   */
  private long pub(String subject, int timeoutMs, ByteBuffer payload,
      CompletableFuture<Completion> future, boolean keepReply) throws RdmamsgException {
    engine.ensureOpen();
    SubjectRules.checkSubject(subject);
    checkFrameSize(SubjectFrames.pubFields(subject), payload.remaining());
    return sender.queue(id -> {
      if (keepReply) inbox.await(id); // before the PUB can go out: its reply may come at once
      SubjectFrames.pub(transport.out(), id, timeoutMs, subject, payload);
    }, future);
  }

  // --- replying -------------------------------------------------------------------------

  /** Queues the reply to {@code request}, a message with a reply token; its id. */
  long reply(Message request, ByteBuffer payload) throws RdmamsgException {
    engine.ensureOpen();
    final String token = request.replyTo();
    if (token.isEmpty()) {
      throw new RdmamsgException(Errc.BAD_REQUEST,
          "the message is not a request: it has no reply token");
    }
    if (!isToken(token)) {
      throw new RdmamsgException(Errc.BAD_REQUEST, "'" + token + "' is not a reply token");
    }
    checkFrameSize(SubjectFrames.respondFields(token), payload.remaining());
    return sender.queue(id -> SubjectFrames.respond(transport.out(), id, token, payload), null);
  }

  /** A reply token as a MSG carries it: 1-255 printable ASCII characters. */
  private static boolean isToken(String s) {
    if (s.length() > SubjectRules.MAX_LENGTH) return false;
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c <= ' ' || c >= 0x7f) return false;
    }
    return true;
  }

  // --- checks ---------------------------------------------------------------------------

  /**
   * {@code too_large} above the daemon's maximum message size, or when the
   * frame's fields and payload together pass the daemon's limit on a frame
   * body (which would end the connection).
   */
  private void checkFrameSize(int fields, int length) throws RdmamsgException {
    sender.checkSize(length);
    long body = (long) fields + length;
    long limit = Integer.toUnsignedLong(handshake.maxMessage()) + Frames.MAX_FRAME_OVERHEAD;
    if (body > limit) {
      throw new RdmamsgException(Errc.TOO_LARGE, "message of " + length + " bytes with its "
          + fields + " bytes of subject and fields exceeds the daemon's frame limit of " + limit);
    }
  }

  /** A request's timeout in milliseconds (rounded up), 1 to 2^32 - 1 (unsigned in the int). */
  private static int timeoutMs(Duration timeout) throws RdmamsgException {
    if (timeout.isNegative() || timeout.isZero()
        || timeout.compareTo(Duration.ofMillis(MAX_TIMEOUT_MS)) > 0) {
      throw new RdmamsgException(Errc.BAD_REQUEST, "a request's timeout is 1 ms to "
          + MAX_TIMEOUT_MS + " ms, not " + timeout.toMillis() + " ms");
    }
    long ms = timeout.toMillis();
    if (!timeout.minusMillis(ms).isZero()) ms++; // a part of a millisecond is one more
    return (int) ms;
  }
}
