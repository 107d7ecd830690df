package org.rdmamsg;

import java.util.HashMap;
import java.util.HashSet;

/**
 * This client's subscriptions: their ids (1, 2, 3, ..., chosen by the
 * client), the SUBs waiting for the daemon's answer (SUBSCRIBED, or an ERROR
 * whose {@code msgId} is the id), and the subscriptions that hold. An answer
 * to a SUB whose caller gave up (timed out) is dropped. Not thread-safe; the
 * client guards it.
 */
final class Subscriptions {
  private long lastId;
  private final HashSet<Long> waiting = new HashSet<>(); // SUBs sent, not answered
  private final HashMap<Long, Object> answers = new HashMap<>(); // Boolean.TRUE or the error
  private final HashSet<Long> abandoned = new HashSet<>();
  private final HashSet<Long> active = new HashSet<>();

  /** A new subscription about to be asked for: its id. */
  long issue() {
    long id = ++lastId;
    waiting.add(id);
    return id;
  }

  /**
   * The daemon's answer to SUB {@code id}: {@code Boolean.TRUE} or the
   * {@link RdmamsgException} it refused it with. False if no SUB with that
   * id waits for one.
   */
  boolean answer(long id, Object reply) {
    if (waiting.remove(id)) {
      answers.put(id, reply);
      return true;
    }
    return abandoned.remove(id);
  }

  boolean isAnswered(long id) {
    return answers.containsKey(id);
  }

  /** The answer to SUB {@code id}, removed; a subscription that holds is active from now on. */
  Object take(long id) {
    Object reply = answers.remove(id);
    if (reply == Boolean.TRUE) active.add(id);
    return reply;
  }

  /** SUB {@code id}'s caller does not wait any more; its answer, when it comes, is dropped. */
  void abandon(long id) {
    answers.remove(id);
    if (waiting.remove(id)) abandoned.add(id);
  }

  /** Whether subscription {@code id} holds. */
  boolean isActive(long id) {
    return active.contains(id);
  }

  /** Subscription {@code id} is given up; false if it was not active. */
  boolean remove(long id) {
    return active.remove(id);
  }

  /** The subscriptions that hold. */
  int activeCount() {
    return active.size();
  }
}
