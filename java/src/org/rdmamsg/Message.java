package org.rdmamsg;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/**
 * A received message: who sent it, to which of this client's services, and
 * its payload.
 *
 * @param srcNode the sender's node
 * @param srcService the sender's service; empty if it registered none
 * @param service the local service the message was addressed to
 * @param payload the message's bytes, from position 0 to the limit; a heap
 *     buffer the message owns (the application may keep or change it)
 */
public record Message(String srcNode, String srcService, String service, ByteBuffer payload) {
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
