package org.rdmamsg;

import java.time.Duration;
import java.util.Objects;

/**
 * How {@link Client#connect(String, ConnectOptions)} connects. A mutable
 * builder: {@code new ConnectOptions().clientName("orders").ioThread(true)}.
 */
public final class ConnectOptions {
  private String clientName = "rdmamsg-java";
  private Duration timeout = Duration.ofSeconds(5);
  private boolean ioThread;

  /** The defaults: client name {@code rdmamsg-java}, 5 s handshake timeout, no I/O thread. */
  public ConnectOptions() {}

  /** The name shown in the daemon's logs (at most 63 bytes; longer names are cut). */
  public ConnectOptions clientName(String name) {
    this.clientName = Objects.requireNonNull(name);
    return this;
  }

  /** How long the connection and the HELLO/WELCOME handshake may take. */
  public ConnectOptions timeout(Duration timeout) {
    this.timeout = Objects.requireNonNull(timeout);
    return this;
  }

  /**
   * With {@code true}, the client runs a daemon thread of its own that reads
   * from rdmamsgd all the time: completion futures and the completion
   * listener are then completed without the application calling into the
   * client. Without it (the default), the client reads only inside its own
   * calls ({@code receive}, {@code waitCompletion}, {@code flush},
   * {@code processIo}, a {@code send} that waits), as the C++ client does.
   */
  public ConnectOptions ioThread(boolean on) {
    this.ioThread = on;
    return this;
  }

  String clientName() {
    return clientName;
  }

  Duration timeout() {
    return timeout;
  }

  boolean ioThread() {
    return ioThread;
  }
}
