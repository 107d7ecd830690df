package org.rdmamsg;

/**
 * What the daemon does with a subscription whose application does not keep
 * up, once its pending limit of messages is delivered and not taken
 * (docs/protocol.md, "Subjects"). The same values as {@code
 * rdmamsg::SlowConsumer} in the C++ client and the SUB frame's {@code
 * policy}.
 */
public enum SlowConsumer {
  /** Drops what comes for this subscription only, counted in the publishers' completions. */
  DROP(0),
  /**
   * Never drops: its publishers are held (a remote publisher's flow, a local
   * publisher is no longer read) until it takes what is pending.
   */
  BLOCK(1);

  private final int value;

  SlowConsumer(int value) {
    this.value = value;
  }

  /** The policy's value in a SUB frame. */
  public int value() {
    return value;
  }
}
