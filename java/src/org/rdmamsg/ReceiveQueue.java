package org.rdmamsg;

import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.Collections;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.Iterator;
import java.util.Set;

/**
 * The messages read from the daemon and not returned to the application
 * yet, and what the daemon has been told about them. Every delivery counts
 * — a DELIVER, a subject's MSG, a request's REPLY — in the order read. A
 * message returned counts as taken at once (confirmation on receive, the
 * default) or at the application's next {@code confirmReceived}; the daemon
 * confirms a message to its sender only once it has heard, in a cumulative
 * CONSUMED, that it was taken.
 *
 * <p>The reply a {@code requestAndWait} waits for is kept for it
 * ({@link #await}): {@code receive} passes over it, and it is taken out of
 * turn ({@link #takeReply}). CONSUMED counts the deliveries from the first,
 * so a message taken out of turn is reported only once everything read
 * before it was taken too: until then it stays in the queue, marked taken.
 * Not thread-safe; the client guards it.
 */
final class ReceiveQueue {
  private final ArrayDeque<Message> inbox = new ArrayDeque<>();
  // Messages of the inbox already returned, out of turn; the head is never one.
  private final Set<Message> takenOutOfTurn = Collections.newSetFromMap(new IdentityHashMap<>());
  // The requests whose reply a requestAndWait waits for, and the reply once it came.
  private final HashMap<Long, Message> awaited = new HashMap<>();
  private int repliesKept; // awaited replies in the inbox
  private boolean confirmOnReceive = true;
  private long received; // messages handed to the application, counted from the first read
  private long taken; // of those, the ones that count as taken
  private long consumedSent; // the last CONSUMED count sent

  /** A DELIVER: the payload, {@code length} bytes at {@code offset} of {@code buf}, is copied. */
  void deliver(String srcNode, String srcService, String toService, ByteBuffer buf, int offset,
      int length) {
    inbox.add(new Message(srcNode, srcService, toService, copy(buf, offset, length)));
  }

  /** A MSG for subscription {@code subId}; the payload is copied. */
  void deliverMsg(long subId, String srcNode, String subject, String replyTo, ByteBuffer buf,
      int offset, int length) {
    inbox.add(new Message(srcNode, "", "", subject, replyTo, subId, 0,
        copy(buf, offset, length)));
  }

  /** A REPLY to request {@code requestId}; the payload is copied. */
  void deliverReply(long requestId, String srcNode, ByteBuffer buf, int offset, int length) {
    Message m = new Message(srcNode, "", "", "", "", 0, requestId, copy(buf, offset, length));
    inbox.add(m);
    if (awaited.containsKey(requestId) && awaited.get(requestId) == null) {
      awaited.put(requestId, m);
      repliesKept++;
    }
  }

  private static ByteBuffer copy(ByteBuffer buf, int offset, int length) {
    byte[] payload = new byte[length];
    buf.get(offset, payload);
    return ByteBuffer.wrap(payload);
  }

  /** Messages {@code receive} may return. */
  boolean isEmpty() {
    return size() == 0;
  }

  int size() {
    return inbox.size() - takenOutOfTurn.size() - repliesKept;
  }

  /**
   * The oldest message {@code receive} may return, now returned to the
   * application (taken, when confirming on receive); null if there is none.
   */
  Message take() {
    Message head = inbox.peek();
    if (head == null || isEmpty()) return null;
    if (!isKept(head)) {
      inbox.poll();
      returned();
      popTaken();
      return head;
    }
    // The head waits for its requestAndWait: the oldest message after it is taken out of turn.
    Iterator<Message> it = inbox.iterator();
    for (Message m; it.hasNext();) {
      m = it.next();
      if (!isKept(m) && !takenOutOfTurn.contains(m)) {
        takenOutOfTurn.add(m);
        return m;
      }
    }
    return null; // not reached: isEmpty() said there is one
  }

  private boolean isKept(Message m) {
    return m.requestId() != 0 && awaited.get(m.requestId()) == m;
  }

  /** A message came off the head of the inbox: it was returned. */
  private void returned() {
    ++received;
    if (confirmOnReceive) taken = received;
  }

  /** Removes the messages taken out of turn that are at the head now. */
  private void popTaken() {
    while (!inbox.isEmpty() && takenOutOfTurn.remove(inbox.peek())) {
      inbox.poll();
      returned();
    }
  }

  /** A requestAndWait waits for request {@code requestId}'s reply: keep it for it. */
  void await(long requestId) {
    awaited.put(requestId, null);
  }

  /** Whether the reply to awaited request {@code requestId} came. */
  boolean hasReply(long requestId) {
    return awaited.get(requestId) != null;
  }

  /** Awaited request {@code requestId}'s reply, now returned to the application, or null. */
  Message takeReply(long requestId) {
    Message m = awaited.get(requestId);
    if (m == null) return null;
    awaited.remove(requestId);
    repliesKept--;
    takenOutOfTurn.add(m);
    popTaken();
    return m;
  }

  /** Nobody waits for request {@code requestId}'s reply any more: {@code receive} returns it. */
  void stopAwaiting(long requestId) {
    if (awaited.remove(requestId) != null) repliesKept--;
  }

  void setConfirmOnReceive(boolean on) {
    confirmOnReceive = on;
  }

  /** Every message returned so far counts as taken. */
  void confirmAll() {
    taken = received;
  }

  /** Queues a CONSUMED with everything taken, if the daemon has not heard it yet. */
  void reportConsumed(ByteQueue out) {
    if (taken > consumedSent) {
      Frames.consumed(out, taken);
      consumedSent = taken;
    }
  }
}
