package org.rdmamsg;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The receive queue: messages in the order read, their payloads their own,
 * and the CONSUMED counts that tell the daemon what was taken.
 */
class ReceiveQueueTest {
  private static void deliver(ReceiveQueue q, String text) {
    byte[] b = ("..." + text).getBytes(StandardCharsets.UTF_8);
    q.deliver("alpha", "src", "inbox", ByteBuffer.wrap(b), 3, b.length - 3);
  }

  /** The counts of the CONSUMED frames queued in {@code out}, which is emptied. */
  private static List<Long> consumed(ByteQueue out) {
    List<Long> counts = new ArrayList<>();
    while (!out.isEmpty()) {
      ByteBuffer b = out.buffer();
      int at = out.start();
      assertEquals(Frames.CONSUMED, b.get(at + 5));
      assertEquals(8, b.getInt(at));
      counts.add(b.getLong(at + 8));
      out.consume(16);
    }
    return counts;
  }

  @Test
  void messagesComeOutInOrderWithTheirOwnCopyOfThePayload() {
    ReceiveQueue q = new ReceiveQueue();
    byte[] network = "..one".getBytes(StandardCharsets.UTF_8);
    ByteBuffer buf = ByteBuffer.wrap(network);
    q.deliver("alpha", "", "inbox", buf, 2, 3);
    network[2] = 'X'; // the buffer is reused for the next read
    deliver(q, "two");
    assertEquals(2, q.size());
    Message first = q.take();
    assertEquals("one", first.text());
    assertEquals("alpha", first.srcNode());
    assertEquals("", first.srcService());
    assertEquals("inbox", first.service());
    assertEquals(0, first.payload().position());
    assertEquals("two", q.take().text());
    assertTrue(q.isEmpty());
  }

  @Test
  void consumedCountsEverythingTakenAndIsSentOnlyWhenItGrew() {
    ReceiveQueue q = new ReceiveQueue();
    ByteQueue out = new ByteQueue(64);
    q.reportConsumed(out);
    assertEquals(List.of(), consumed(out)); // nothing taken yet
    for (String s : List.of("a", "b", "c")) deliver(q, s);
    q.take();
    q.take();
    q.reportConsumed(out);
    q.reportConsumed(out);
    assertEquals(List.of(2L), consumed(out));
    q.take();
    q.reportConsumed(out);
    assertEquals(List.of(3L), consumed(out));
  }

  @Test
  void withoutConfirmOnReceiveOnlyAConfirmationCounts() {
    ReceiveQueue q = new ReceiveQueue();
    ByteQueue out = new ByteQueue(64);
    q.setConfirmOnReceive(false);
    for (String s : List.of("a", "b", "c")) deliver(q, s);
    q.take();
    q.take();
    q.reportConsumed(out);
    assertEquals(List.of(), consumed(out));
    q.confirmAll(); // covers the two returned, not the one still queued
    q.reportConsumed(out);
    assertEquals(List.of(2L), consumed(out));
    q.setConfirmOnReceive(true);
    q.take();
    q.reportConsumed(out);
    assertEquals(List.of(3L), consumed(out));
  }

  private static void reply(ReceiveQueue q, long requestId, String text) {
    byte[] b = text.getBytes(StandardCharsets.UTF_8);
    q.deliverReply(requestId, "beta", ByteBuffer.wrap(b), 0, b.length);
  }

  @Test
  void subjectMessagesAndRepliesCarryTheirFieldsAndCountAsDeliveries() {
    ReceiveQueue q = new ReceiveQueue();
    ByteQueue out = new ByteQueue(64);
    byte[] b = "..m".getBytes(StandardCharsets.UTF_8);
    q.deliverMsg(5, "beta", "orders.x", "beta/1/2", ByteBuffer.wrap(b), 2, 1);
    reply(q, 9, "r");
    Message m = q.take();
    assertEquals(new Message("beta", "", "", "orders.x", "beta/1/2", 5, 0,
        ByteBuffer.wrap(new byte[] {'m'})), m);
    Message r = q.take();
    assertEquals(9, r.requestId());
    assertEquals("r", r.text());
    q.reportConsumed(out);
    assertEquals(List.of(2L), consumed(out));
  }

  @Test
  void anAwaitedReplyIsKeptFromReceiveAndTakenOutOfTurn() {
    ReceiveQueue q = new ReceiveQueue();
    ByteQueue out = new ByteQueue(64);
    q.await(7);
    deliver(q, "a");
    reply(q, 7, "kept");
    reply(q, 8, "not awaited");
    deliver(q, "b");
    assertTrue(q.hasReply(7));
    assertFalse(q.hasReply(8));
    assertEquals(3, q.size()); // the kept reply is not for receive
    assertEquals("kept", q.takeReply(7).text());
    assertNull(q.takeReply(7));
    q.reportConsumed(out);
    assertEquals(List.of(), consumed(out)); // "a" before it is not taken yet
    assertEquals("a", q.take().text());
    q.reportConsumed(out);
    assertEquals(List.of(2L), consumed(out)); // "a" and the reply
    assertEquals("not awaited", q.take().text());
    assertEquals("b", q.take().text());
    assertTrue(q.isEmpty());
    assertNull(q.take());
    q.reportConsumed(out);
    assertEquals(List.of(4L), consumed(out));
  }

  @Test
  void receivePassesOverAKeptReplyAtTheHeadAndCountsOnlyWhatIsTakenFromTheFirst() {
    ReceiveQueue q = new ReceiveQueue();
    ByteQueue out = new ByteQueue(64);
    q.await(3);
    reply(q, 3, "kept");
    deliver(q, "a");
    assertEquals(1, q.size());
    assertEquals("a", q.take().text()); // taken out of turn: the reply before it is not
    assertTrue(q.isEmpty());
    q.reportConsumed(out);
    assertEquals(List.of(), consumed(out));
    assertEquals("kept", q.takeReply(3).text());
    q.reportConsumed(out);
    assertEquals(List.of(2L), consumed(out));
  }

  @Test
  void aReplyNobodyAwaitsAnyMoreGoesToReceive() {
    ReceiveQueue q = new ReceiveQueue();
    q.await(4);
    reply(q, 4, "late");
    assertTrue(q.isEmpty());
    q.stopAwaiting(4);
    assertEquals(1, q.size());
    assertEquals(4, q.take().requestId());
    q.await(5);
    q.stopAwaiting(5); // before its reply came
    reply(q, 5, "later");
    assertEquals("later", q.take().text());
  }
}
