package org.rdmamsg;

import java.time.Duration;

/**
 * Waiting for a condition with a deadline instead of sleeping: the short
 * pause between polls only yields the processor; correctness never depends
 * on it.
 */
final class Wait {
  static final Duration DEFAULT = Duration.ofSeconds(15);

  /** A condition that may fail with an exception. */
  interface Condition {
    boolean holds() throws Exception;
  }

  private Wait() {}

  static boolean until(Condition c) throws Exception {
    return until(c, DEFAULT);
  }

  /** Polls {@code c} until it holds or {@code timeout} passes; its last value. */
  static boolean until(Condition c, Duration timeout) throws Exception {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (!c.holds()) {
      if (System.nanoTime() - deadline > 0) return c.holds();
      Thread.sleep(2);
    }
    return true;
  }
}
