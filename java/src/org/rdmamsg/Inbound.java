package org.rdmamsg;

import java.nio.ByteBuffer;

/**
 * Where each frame from the daemon goes: the WELCOME to the handshake,
 * messages (DELIVER, a subject's MSG, a request's REPLY) to the receive
 * queue, ACKs, PUB_ACKs and per-message ERRORs to the completions, HOLD and
 * RESUME to the holds, replies to the requests that wait for them, and
 * SUBSCRIBED (or a SUB's ERROR) to the subscriptions. What ends the
 * connection — BYE, an ERROR that answers no request, a reply nobody asked
 * for — is thrown, and the decoder passes it on to the client, which
 * closes. Not thread-safe; called by the decoder under the client's lock.
 */
final class Inbound implements Frames.Handler {
  private final Handshake handshake;
  private final ReceiveQueue inbox;
  private final Completions completions;
  private final Holds holds;
  private final Requests registers;
  private final Requests statuses;
  private final Subscriptions subscriptions;

  Inbound(Handshake handshake, ReceiveQueue inbox, Completions completions, Holds holds,
      Requests registers, Requests statuses, Subscriptions subscriptions) {
    this.handshake = handshake;
    this.inbox = inbox;
    this.completions = completions;
    this.holds = holds;
    this.registers = registers;
    this.statuses = statuses;
    this.subscriptions = subscriptions;
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
    if (inReplyTo == Frames.SUB) { // msgId is the subscription's id
      RdmamsgException e = new RdmamsgException(errc, text);
      if (!subscriptions.answer(msgId, e)) throw e; // answers no SUB: for the connection
      return;
    }
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

  @Override
  public void subscribed(long subId) throws RdmamsgException {
    if (!subscriptions.answer(subId, Boolean.TRUE)) {
      throw unsolicited("SUBSCRIBED " + Long.toUnsignedString(subId));
    }
  }

  @Override
  public void pubAck(long msgId, Errc errc, int matched, int taken, int dropped, String text) {
    completions.completePublish(new Completion(msgId, errc, text, matched, taken, dropped));
  }

  @Override
  public void msg(long subId, String srcNode, String subject, String replyTo, ByteBuffer buf,
      int offset, int length) {
    inbox.deliverMsg(subId, srcNode, subject, replyTo, buf, offset, length);
  }

  @Override
  public void reply(long requestId, String srcNode, ByteBuffer buf, int offset, int length) {
    completions.settle(requestId); // the reply is the request's outcome: no completion comes
    inbox.deliverReply(requestId, srcNode, buf, offset, length);
  }

  private static RdmamsgException unsolicited(String what) {
    return new RdmamsgException(Errc.PROTOCOL_ERROR, "rdmamsgd sent " + what
        + " without a request");
  }
}
