package org.rdmamsg;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/**
 * A received message: who sent it, to which of this client's services (or
 * subscriptions), and its payload. Three kinds come:
 *
 * <ul>
 *   <li>a message to a registered service: {@code srcService} and {@code
 *       service} are set, the subject fields empty or 0;
 *   <li>a message published to a subject one of this client's subscriptions
 *       matched: {@code subject} and {@code subscription} are set, and
 *       {@code replyTo} if it is a request, which {@link Client#reply}
 *       answers;
 *   <li>the reply to one of this client's {@linkplain Client#request
 *       requests}: {@code requestId} is set.
 * </ul>
 *
 * @param srcNode the sender's node
 * @param srcService the sender's service; empty if it registered none, and
 *     for a subject message or a reply
 * @param service the local service the message was addressed to; empty for
 *     a subject message or a reply
 * @param subject the subject it was published to; empty unless it is a
 *     subject message
 * @param replyTo the request's reply token, for {@link Client#reply}; empty
 *     unless it is a subject message of a request
 * @param subscription the id {@code subscribe} returned for the subscription
 *     it matched; 0 unless it is a subject message
 * @param requestId the id {@code request} returned for the request it
 *     answers; 0 unless it is a reply
 * @param payload the message's bytes, from position 0 to the limit; a heap
 *     buffer the message owns (the application may keep or change it)
 */
public record Message(String srcNode, String srcService, String service, String subject,
    String replyTo, long subscription, long requestId, ByteBuffer payload) {
  /** A message to the local service {@code service}, without the subject fields. */
  public Message(String srcNode, String srcService, String service, ByteBuffer payload) {
    this(srcNode, srcService, service, "", "", 0, 0, payload);
  }

  /** The payload decoded as UTF-8 (the buffer's position is not moved). */
  public String text() {
    return StandardCharsets.UTF_8.decode(payload.duplicate()).toString();
  }

  /** A copy of the payload's remaining bytes. */
  public byte[] bytes() {
    byte[] b = new byte[payload.remaining()];
    payload.duplicate().get(b);
    return b;
  }
}
