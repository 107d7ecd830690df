package org.rdmamsg;

/**
 * The outcome of one sent message: {@link Errc#OK} once the receiving
 * application took it (its client library returned it from {@code receive}),
 * otherwise the reason it failed, with the daemon's explanation, which names
 * the node or service at fault.
 *
 * @param msgId the id {@code send} returned for the message
 * @param errc the outcome
 * @param message the daemon's explanation; empty for {@link Errc#OK}
 */
public record Completion(long msgId, Errc errc, String message) {
  /** True if the message was taken by a listener of its service. */
  public boolean ok() {
    return errc == Errc.OK;
  }

  @Override
  public String toString() {
    return ok() ? "message " + Long.toUnsignedString(msgId) + ": ok"
                : "message " + Long.toUnsignedString(msgId) + ": " + errc + ": " + message;
  }
}
