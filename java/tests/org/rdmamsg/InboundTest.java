package org.rdmamsg;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

/**
 * Where each frame from the daemon goes, and which frames end the
 * connection (thrown with the reason the client closes with).
 */
class InboundTest {
  private final Handshake handshake = new Handshake();
  private final ReceiveQueue inbox = new ReceiveQueue();
  private final Completions completions = new Completions();
  private final Holds holds = new Holds();
  private final Requests registers = new Requests();
  private final Requests statuses = new Requests();
  private final Subscriptions subscriptions = new Subscriptions();
  private final Inbound in =
      new Inbound(handshake, inbox, completions, holds, registers, statuses, subscriptions);

  private static RdmamsgException ends(Errc errc, Executable frame) {
    RdmamsgException e = assertThrows(RdmamsgException.class, frame);
    assertEquals(errc, e.errc());
    return e;
  }

  @Test
  void theWelcomeGoesToTheHandshakeAndMessagesToTheReceiveQueue() {
    in.welcome(4096, "beta");
    assertTrue(handshake.isDone());
    assertEquals("beta", handshake.nodeName());
    byte[] b = "hello".getBytes(StandardCharsets.UTF_8);
    in.deliver("alpha", "orders", "inbox", ByteBuffer.wrap(b), 0, b.length);
    Message m = inbox.take();
    assertEquals("hello", m.text());
    assertEquals("orders", m.srcService());
  }

  @Test
  void acksAndPerMessageErrorsAreCompletions() throws Exception {
    for (int i = 0; i < 3; i++) completions.issue(null);
    in.ack(1, 2);
    in.error(3, Errc.UNKNOWN_NODE, Frames.SEND, "no node gamma");
    assertEquals(new Completion(1, Errc.OK, ""), completions.poll());
    assertEquals(new Completion(2, Errc.OK, ""), completions.poll());
    assertEquals(new Completion(3, Errc.UNKNOWN_NODE, "no node gamma"), completions.poll());
    assertEquals(0, completions.inFlight());
  }

  @Test
  void holdAndResumeGoToTheHolds() {
    in.hold("beta", "slow");
    assertTrue(holds.isHeld("beta", "slow"));
    in.resume("beta", "slow");
    assertFalse(holds.isHeld("beta", "slow"));
  }

  @Test
  void repliesAnswerTheRequestsInOrderIncludingTheirErrors() throws Exception {
    long r1 = registers.issue();
    long r2 = registers.issue();
    long s1 = statuses.issue();
    in.registered("orders");
    in.error(0, Errc.DUPLICATE_SERVICE, Frames.REGISTER, "billing is taken");
    in.statusReply("{\"node\":\"beta\"}");
    assertEquals(Boolean.TRUE, registers.take(r1));
    RdmamsgException e = (RdmamsgException) registers.take(r2);
    assertEquals(Errc.DUPLICATE_SERVICE, e.errc());
    assertEquals("billing is taken", e.detail());
    assertEquals("{\"node\":\"beta\"}", statuses.take(s1));
  }

  @Test
  void aReplyNobodyAskedForIsAProtocolError() {
    assertTrue(ends(Errc.PROTOCOL_ERROR, () -> in.registered("orders")).getMessage()
        .contains("REGISTERED orders without a request"));
    assertTrue(ends(Errc.PROTOCOL_ERROR, () -> in.statusReply("{}")).getMessage()
        .contains("STATUS_REPLY without a request"));
    // An error in reply to a request nobody made is the daemon's, for the connection.
    ends(Errc.BAD_REQUEST, () -> in.error(0, Errc.BAD_REQUEST, Frames.REGISTER, "bad"));
  }

  @Test
  void aConnectionLevelErrorOrAGoodbyeEndsTheConnectionWithItsReason() {
    RdmamsgException e =
        ends(Errc.SHUTTING_DOWN, () -> in.error(0, Errc.SHUTTING_DOWN, 0, "rdmamsgd stops"));
    assertEquals("rdmamsgd stops", e.detail());
    long pending = registers.issue();
    ends(Errc.PROTOCOL_ERROR, () -> in.error(0, Errc.PROTOCOL_ERROR, Frames.SEND, "bad frame"));
    assertFalse(registers.isAnswered(pending), "a connection-level error answered a request");
    ends(Errc.NOT_CONNECTED, in::bye);
  }

  @Test
  void anUnansweredRequestAbandonedDropsItsLateReply() throws Exception {
    long n = registers.issue();
    registers.abandon(n);
    in.registered("orders"); // the late reply is expected, and dropped
    assertFalse(registers.isAnswered(n));
    assertSame(null, registers.take(n));
  }

  @Test
  void subjectFramesGoToTheSubscriptionsTheCompletionsAndTheReceiveQueue() throws Exception {
    long sub = subscriptions.issue();
    long refused = subscriptions.issue();
    in.subscribed(sub);
    in.error(refused, Errc.BAD_REQUEST, Frames.SUB, "bad pattern");
    assertEquals(Boolean.TRUE, subscriptions.take(sub));
    assertEquals("bad pattern", ((RdmamsgException) subscriptions.take(refused)).detail());
    long pub = completions.issue(null);
    long request = completions.issue(null);
    in.pubAck(pub, Errc.OK, 1, 1, 0, "");
    byte[] b = "xy".getBytes(StandardCharsets.UTF_8);
    in.msg(sub, "beta", "orders.x", "", ByteBuffer.wrap(b), 0, 1);
    in.reply(request, "gamma", ByteBuffer.wrap(b), 1, 1);
    assertEquals(new Completion(pub, Errc.OK, "", 1, 1, 0), completions.poll());
    assertEquals(0, completions.inFlight()); // the reply settled the request
    assertEquals("orders.x", inbox.take().subject());
    assertEquals("y", inbox.take().text());
  }

  @Test
  void aSubscribedOrSubErrorForNoSubIsForTheConnection() {
    assertTrue(ends(Errc.PROTOCOL_ERROR, () -> in.subscribed(3)).getMessage()
        .contains("SUBSCRIBED 3 without a request"));
    ends(Errc.BUSY, () -> in.error(4, Errc.BUSY, Frames.SUB, "full"));
  }
}
