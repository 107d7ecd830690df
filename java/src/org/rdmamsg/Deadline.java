package org.rdmamsg;

import java.time.Duration;

/**
 * Deadlines as {@link System#nanoTime()} values, with {@link #FOREVER} for
 * "no deadline": what every blocking call of the client and its futures
 * waits until.
 */
final class Deadline {
  /** No deadline. */
  static final long FOREVER = Long.MAX_VALUE;

  private Deadline() {}

  /** The nanoTime {@code timeout} from now; FOREVER for a timeout of more than 73 years. */
  static long after(Duration timeout) {
    long nanos;
    try {
      nanos = timeout.toNanos();
    } catch (ArithmeticException e) {
      return FOREVER;
    }
    if (nanos > FOREVER / 4) return FOREVER; // more than 73 years
    return System.nanoTime() + Math.max(0, nanos);
  }

  /** Nanoseconds left until {@code deadline} (FOREVER stays FOREVER); 0 or less once passed. */
  static long left(long deadline) {
    return deadline == FOREVER ? FOREVER : deadline - System.nanoTime();
  }
}
