package org.rdmamsg;

/**
 * The handshake: the HELLO this client opens with, and what the daemon's
 * WELCOME says — its node name, the largest payload it accepts, and from
 * that the longest frame body this client takes. Before the WELCOME, frames
 * up to {@link Frames#DEFAULT_MAX_BODY} are taken. Not thread-safe; the
 * client guards it.
 */
final class Handshake {
  private boolean welcomed;
  private String nodeName = "";
  private int maxMessage;
  private int maxBody = Frames.DEFAULT_MAX_BODY;

  /**
   * Says HELLO and waits until {@code deadline} (a nanoTime) for the
   * WELCOME; a failure (no WELCOME in time, the daemon's error) closes the
   * connection and is thrown.
   */
  void perform(IoEngine engine, ByteQueue out, String clientName, long deadline,
      String socketPath) throws RdmamsgException {
    engine.lock();
    try {
      hello(out, clientName);
      if (!engine.await(this::isDone, deadline)) {
        engine.lose(new RdmamsgException(Errc.TIMEOUT, "no WELCOME from rdmamsgd at " + socketPath
            + " in time"));
        throw engine.failure();
      }
    } catch (RdmamsgException e) {
      engine.lose(e);
      throw e;
    } finally {
      engine.unlock();
    }
  }

  /** Queues the HELLO that opens the connection. */
  void hello(ByteQueue out, String clientName) {
    Frames.hello(out, clientName);
  }

  /** The daemon's WELCOME: its maximum message size (unsigned) and its node name. */
  void welcome(int maxMessageSize, String node) {
    nodeName = node;
    maxMessage = maxMessageSize;
    long body = Integer.toUnsignedLong(maxMessageSize) + Frames.MAX_RECEIVE_OVERHEAD;
    maxBody = (int) Math.min(Integer.MAX_VALUE - 16, Math.max(body, Frames.DEFAULT_MAX_BODY));
    if (maxMessage < 0) maxMessage = Integer.MAX_VALUE - Frames.MAX_RECEIVE_OVERHEAD - 16;
    welcomed = true;
  }

  /** Whether the WELCOME came. */
  boolean isDone() {
    return welcomed;
  }

  /** The daemon's node name; empty before the WELCOME. */
  String nodeName() {
    return nodeName;
  }

  /** The largest payload the daemon accepts; 0 before the WELCOME. */
  int maxMessage() {
    return maxMessage;
  }

  /** The longest frame body taken from the daemon. */
  int maxBody() {
    return maxBody;
  }
}
