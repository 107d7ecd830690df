package org.rdmamsg;

/**
 * The way of a message in, once read: handed to the application from the
 * receive queue, and the daemon told that it was taken. Everything read is
 * reported as soon as the application took the last of it, so that the last
 * message of a burst is confirmed at once; otherwise the I/O thread reports
 * before it waits for input. Called under the client's lock.
 */
final class Receiver {
  private final IoEngine engine;
  private final ReceiveQueue inbox;

  Receiver(IoEngine engine, ReceiveQueue inbox) {
    this.engine = engine;
    this.inbox = inbox;
  }

  /** The next message, waiting until {@code deadline} (a nanoTime); null if none came. */
  Message receiveUntil(long deadline) throws RdmamsgException {
    try {
      if (!engine.await(() -> !inbox.isEmpty(), deadline)) return null;
    } catch (RdmamsgException e) {
      if (inbox.isEmpty()) throw e; // what came before the loss is still handed out
    }
    return take();
  }

  /** The next message if one is there (after a nonblocking read), else null. */
  Message tryReceive() throws RdmamsgException {
    if (inbox.isEmpty() && engine.failure() == null) engine.pumpNow();
    if (inbox.isEmpty()) {
      engine.ensureOpen();
      return null;
    }
    return take();
  }

  /** Every message returned so far counts as taken; the daemon hears it now. */
  void confirmReceived() throws RdmamsgException {
    engine.ensureOpen();
    inbox.confirmAll();
    engine.reportConsumed();
    engine.writeNow();
  }

  /** Request {@code requestId}'s reply, kept for a requestAndWait, taken; null if none came. */
  Message takeReply(long requestId) {
    Message m = inbox.takeReply(requestId);
    if (m != null) reportIfAllTaken();
    return m;
  }

  private Message take() {
    Message m = inbox.take();
    reportIfAllTaken();
    return m;
  }

  private void reportIfAllTaken() {
    if (inbox.isEmpty() && engine.failure() == null) {
      engine.reportConsumed();
      engine.writeNow();
    }
  }
}
