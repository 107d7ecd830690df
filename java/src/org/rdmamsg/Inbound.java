package org.rdmamsg;

import java.nio.ByteBuffer;

/**
 * Where each frame from the daemon goes: the WELCOME to the handshake,
 * messages to the receive queue, ACKs and per-message ERRORs to the
 * completions, HOLD and RESUME to the holds, replies to the requests that
 * wait for them. What ends the connection — BYE, an ERROR that answers no
 * request, a reply nobody asked for — is thrown, and the decoder passes it
 * on to the client, which closes. Not thread-safe; called by the decoder
 * under the client's lock.
 */
final class Inbound implements Frames.Handler {
  private final Handshake handshake;
  private final ReceiveQueue inbox;
  private final Completions completions;
  private final Holds holds;
  private final Requests registers;
  private final Requests statuses;

  Inbound(Handshake handshake, ReceiveQueue inbox, Completions completions, Holds holds,
      Requests registers, Requests statuses) {
    this.handshake = handshake;
    this.inbox = inbox;
    this.completions = completions;
    this.holds = holds;
    this.registers = registers;
    this.statuses = statuses;
  }

  @Override
  public void welcome(int maxMessageSize, String node) {
    handshake.welcome(maxMessageSize, node);
  }

  @Override
  public void registered(String service) throws RdmamsgException {
    if (!registers.answer(Boolean.TRUE)) throw unsolicited("REGISTERED " + service);
  }

  @Override
  public void deliver(String srcNode, String srcService, String toService, ByteBuffer buf,
      int offset, int length) {
    inbox.deliver(srcNode, srcService, toService, buf, offset, length);
  }

  @Override
  public void ack(long firstMsgId, long count) {
    completions.complete(firstMsgId, count, Errc.OK, "");
  }

  @Override
  public void error(long msgId, Errc errc, int inReplyTo, String text) throws RdmamsgException {
    if (msgId != 0) {
      completions.complete(msgId, 1, errc, text);
      return;
    }
    RdmamsgException e = new RdmamsgException(errc, text);
    boolean expected = switch (inReplyTo) {
      case Frames.REGISTER -> registers.answer(e);
      case Frames.STATUS_REQUEST -> statuses.answer(e);
      default -> false;
    };
    if (!expected) throw e; // connection-level: the daemon closes
  }

  @Override
  public void statusReply(String json) throws RdmamsgException {
    if (!statuses.answer(json)) throw unsolicited("STATUS_REPLY");
  }

  @Override
  public void bye() throws RdmamsgException {
    throw new RdmamsgException(Errc.NOT_CONNECTED, "rdmamsgd said goodbye");
  }

  @Override
  public void hold(String node, String service) {
    holds.hold(node, service);
  }

  @Override
  public void resume(String node, String service) {
    holds.resume(node, service);
  }

  private static RdmamsgException unsolicited(String what) {
    return new RdmamsgException(Errc.PROTOCOL_ERROR, "rdmamsgd sent " + what
        + " without a request");
  }
}
