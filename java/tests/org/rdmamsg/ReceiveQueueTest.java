package org.rdmamsg;

import static org.junit.jupiter.api.Assertions.assertEquals;
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
}
