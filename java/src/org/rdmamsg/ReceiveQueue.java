package org.rdmamsg;

import java.nio.ByteBuffer;
import java.util.ArrayDeque;

/**
 * The messages read from the daemon and not returned to the application
 * yet, and what the daemon has been told about them. A message returned
 * counts as taken at once (confirmation on receive, the default) or at the
 * application's next {@code confirmReceived}; the daemon confirms a message
 * to its sender only once it has heard, in a cumulative CONSUMED, that it
 * was taken. Not thread-safe; the client guards it.
 */
final class ReceiveQueue {
  private final ArrayDeque<Message> inbox = new ArrayDeque<>();
  private boolean confirmOnReceive = true;
  private long received; // messages handed to the application
  private long taken; // of those, the ones that count as taken
  private long consumedSent; // the last CONSUMED count sent

  /** A DELIVER: the payload, {@code length} bytes at {@code offset} of {@code buf}, is copied. */
  void deliver(String srcNode, String srcService, String toService, ByteBuffer buf, int offset,
      int length) {
    byte[] payload = new byte[length];
    buf.get(offset, payload);
    inbox.add(new Message(srcNode, srcService, toService, ByteBuffer.wrap(payload)));
  }

  boolean isEmpty() {
    return inbox.isEmpty();
  }

  int size() {
    return inbox.size();
  }

  /** The oldest message, now returned to the application (taken, when confirming on receive). */
  Message take() {
    Message m = inbox.poll();
    ++received;
    if (confirmOnReceive) taken = received;
    return m;
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
