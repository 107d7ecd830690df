package org.rdmamsg;

import java.nio.ByteBuffer;
import java.util.concurrent.CompletableFuture;

/**
 * The way of a message out: its names and size checked, a wait while the
 * daemon holds its destination, a wait (or {@code WOULD_BLOCK}) while more
 * than {@value #WRITE_BLOCK_LIMIT} bytes are unwritten, its id, its frame
 * queued, and a write once {@value #WRITE_THRESHOLD} bytes are queued (sends
 * go out in batches; every wait of the client writes too). Publishes,
 * requests and replies take the same way from their id on
 * ({@link #queue}). Called under the client's lock.
 */
final class Sender {
  static final int WRITE_THRESHOLD = 64 * 1024; // a send writes once this much is queued
  static final int WRITE_BLOCK_LIMIT = 4 << 20; // a send waits for the socket above this

  private final IoEngine engine;
  private final SocketTransport transport;
  private final Handshake handshake;
  private final Holds holds;
  private final Completions completions;
  private final Names names = new Names();

  Sender(IoEngine engine, SocketTransport transport, Handshake handshake, Holds holds,
      Completions completions) {
    this.engine = engine;
    this.transport = transport;
    this.handshake = handshake;
    this.holds = holds;
    this.completions = completions;
  }

  /** Writes the frame of a message whose id is {@code id} into the transport's output. */
  interface Frame {
    void queue(long id);
  }

  /**
   * Queues a message; its id, or {@link Client#WOULD_BLOCK} when it would
   * wait and {@code mayWait} is false. Its completion goes to {@code future}
   * if not null.
   */
  long send(String node, String service, ByteBuffer payload, String fromService, boolean mayWait,
      CompletableFuture<Completion> future) throws RdmamsgException {
    engine.ensureOpen();
    names.checkDestination(node, service);
    if (!fromService.isEmpty()) Names.check("service", fromService);
    checkSize(payload.remaining());
    if (holds.isHeld(node, service)) {
      if (!mayWait) return Client.WOULD_BLOCK;
      engine.await(() -> !holds.isHeld(node, service), Deadline.FOREVER);
    }
    if (!mayWait && transport.unwritten() >= WRITE_BLOCK_LIMIT) {
      engine.writeSome();
      if (transport.unwritten() >= WRITE_BLOCK_LIMIT) return Client.WOULD_BLOCK;
    }
    final long id = completions.issue(future);
    transport.queueSend(id, node, service, fromService, payload);
    written(mayWait);
    return id;
  }

  /**
   * Queues a message that has no destination to hold (a publish, a request,
   * a reply), its frame written by {@code frame}; its id. Waits while more
   * than {@value #WRITE_BLOCK_LIMIT} bytes are unwritten. The caller checked it.
   */
  long queue(Frame frame, CompletableFuture<Completion> future) throws RdmamsgException {
    engine.ensureOpen();
    final long id = completions.issue(future);
    frame.queue(id);
    written(true);
    return id;
  }

  /** @throws RdmamsgException {@code too_large} for a payload above the daemon's maximum */
  void checkSize(int length) throws RdmamsgException {
    final int maxMessage = handshake.maxMessage();
    if (length > maxMessage) {
      throw new RdmamsgException(Errc.TOO_LARGE, "message of " + length
          + " bytes exceeds the maximum of " + maxMessage);
    }
  }

  /** After a frame was queued: a write once enough is queued, a wait above the limit. */
  private void written(boolean mayWait) throws RdmamsgException {
    if (transport.unwritten() >= WRITE_THRESHOLD) {
      engine.writeSome();
      if (transport.unwritten() > 0) engine.readSome(); // not read: perhaps the daemon said why
    }
    engine.wakeIo();
    if (mayWait && transport.unwritten() >= WRITE_BLOCK_LIMIT) {
      engine.await(() -> transport.unwritten() < WRITE_THRESHOLD, Deadline.FOREVER);
    }
  }
}
