package org.rdmamsg;

/**
 * The outcome of one sent message: {@link Errc#OK} once the receiving
 * application took it (its client library returned it from {@code receive}),
 * otherwise the reason it failed, with the daemon's explanation, which names
 * the node or service at fault.
 *
 * <p>For a {@linkplain Client#publish publish}, the outcome comes once every
 * subscription it matched took it or dropped it, with the counts: {@code
 * ok}, or {@link Errc#NO_SUBSCRIBERS}, {@link Errc#TIMEOUT} or {@link
 * Errc#PEER_UNREACHABLE} with what is known. For a {@linkplain
 * Client#request request} a completion comes only when it got no reply
 * ({@link Errc#NO_RESPONDERS}, {@link Errc#TIMEOUT}, {@link
 * Errc#PEER_UNREACHABLE}); its reply is a {@link Message} instead.
 *
 * @param msgId the id {@code send} (or {@code publish}, {@code request},
 *     {@code reply}) returned for the message
 * @param errc the outcome
 * @param message the daemon's explanation; empty for {@link Errc#OK}
 * @param matched a publish's subscriptions matched (a queue group counts
 *     once); 0 for other messages
 * @param taken of those, the ones whose application took it; 0 for other
 *     messages
 * @param dropped of those, the ones that dropped it (slow consumers); 0 for
 *     other messages
 */
public record Completion(long msgId, Errc errc, String message, int matched, int taken,
    int dropped) {
  /** The outcome of a point-to-point message ({@code send}, {@code reply}): no counts. */
  public Completion(long msgId, Errc errc, String message) {
    this(msgId, errc, message, 0, 0, 0);
  }

  /**
   * True if the message was taken by a listener of its service; for a
   * publish, if every subscription it matched took it or dropped it (see
   * {@link #taken()} and {@link #dropped()}).
   */
  public boolean ok() {
    return errc == Errc.OK;
  }

  @Override
  public String toString() {
    String counts = matched == 0 && taken == 0 && dropped == 0 ? ""
        : " (matched " + matched + ", taken " + taken + ", dropped " + dropped + ")";
    return ok() ? "message " + Long.toUnsignedString(msgId) + ": ok" + counts
                : "message " + Long.toUnsignedString(msgId) + ": " + errc + ": " + message
                    + counts;
  }
}
