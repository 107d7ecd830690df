package org.rdmamsg;

import java.time.Duration;
import java.util.HashMap;
import java.util.HashSet;
import java.util.function.Consumer;

/**
 * The replies to one kind of request (REGISTER, STATUS_REQUEST), and the
 * wait for one ({@link #ask}). The daemon handles a connection's requests in
 * order, so the n-th reply answers the n-th request: several threads may
 * wait for their own replies at once, and a reply to a request whose caller
 * gave up (timed out) is dropped. Not thread-safe; the client guards it.
 */
final class Requests {
  private long sent;
  private long answered;
  private final HashMap<Long, Object> answers = new HashMap<>();
  private final HashSet<Long> abandoned = new HashSet<>();

  /**
   * Queues a request ({@code frame} writes it into {@code out}) and waits up
   * to {@code timeout} for its reply: the reply, or the daemon's error for it
   * thrown ({@code timeout} with {@code noAnswer} when none came). Called
   * under the client's lock.
   */
  Object ask(IoEngine engine, ByteQueue out, Consumer<ByteQueue> frame, Duration timeout,
      String noAnswer) throws RdmamsgException {
    engine.ensureOpen();
    long n = issue();
    frame.accept(out);
    if (!engine.await(() -> isAnswered(n), Deadline.after(timeout))) {
      abandon(n);
      throw new RdmamsgException(Errc.TIMEOUT, noAnswer);
    }
    Object reply = take(n);
    if (reply instanceof RdmamsgException e) {
      throw new RdmamsgException(e.errc(), e.detail());
    }
    return reply;
  }

  /** A new request; its number. */
  long issue() {
    return ++sent;
  }

  /** Records the next reply; false if no request is waiting for one. */
  boolean answer(Object reply) {
    if (answered == sent) return false;
    long n = ++answered;
    if (!abandoned.remove(n)) answers.put(n, reply);
    return true;
  }

  boolean isAnswered(long n) {
    return answers.containsKey(n);
  }

  /** The reply to request {@code n}, removed. */
  Object take(long n) {
    return answers.remove(n);
  }

  /** Request {@code n}'s caller does not wait any more. */
  void abandon(long n) {
    if (answers.remove(n) == null && n > answered) abandoned.add(n);
  }
}
