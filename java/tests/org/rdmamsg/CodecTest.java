package org.rdmamsg;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The frame codec, the byte queue and the completion queue, without a daemon. */
class CodecTest {
  /** Records what a decoder hands out. */
  static final class Recorder implements Frames.Handler {
    final List<String> events = new ArrayList<>();

    @Override
    public void welcome(int max, String node) {
      events.add("welcome " + max + " " + node);
    }

    @Override
    public void registered(String service) {
      events.add("registered " + service);
    }

    @Override
    public void deliver(String n, String s, String t, ByteBuffer b, int off, int len) {
      byte[] p = new byte[len];
      b.get(off, p);
      events.add("deliver " + n + "/" + s + "->" + t + " " + new String(p, StandardCharsets.UTF_8));
    }

    @Override
    public void ack(long first, long count) {
      events.add("ack " + Long.toUnsignedString(first) + "+" + count);
    }

    @Override
    public void error(long id, Errc errc, int inReplyTo, String text) {
      events.add("error " + id + " " + errc + " " + inReplyTo + " " + text);
    }

    @Override
    public void statusReply(String json) {
      events.add("status " + json);
    }

    @Override
    public void bye() {
      events.add("bye");
    }

    @Override
    public void hold(String node, String service) {
      events.add("hold " + node + "/" + service);
    }

    @Override
    public void resume(String node, String service) {
      events.add("resume " + node + "/" + service);
    }

    @Override
    public void subscribed(long subId) {
      events.add("subscribed " + subId);
    }

    @Override
    public void pubAck(long id, Errc errc, int matched, int taken, int dropped, String text) {
      events.add("pub_ack " + id + " " + errc + " " + matched + "/" + taken + "/" + dropped + " "
          + text);
    }

    @Override
    public void msg(long subId, String node, String subject, String replyTo, ByteBuffer b,
        int off, int len) {
      byte[] p = new byte[len];
      b.get(off, p);
      events.add("msg " + subId + " " + node + " " + subject + " [" + replyTo + "] "
          + new String(p, StandardCharsets.UTF_8));
    }

    @Override
    public void reply(long requestId, String node, ByteBuffer b, int off, int len) {
      byte[] p = new byte[len];
      b.get(off, p);
      events.add("reply " + requestId + " " + node + " " + new String(p, StandardCharsets.UTF_8));
    }
  }

  private static ByteQueue frame(int version, int kind, byte[] body) {
    ByteQueue q = new ByteQueue(16);
    int at = q.reserve(8 + body.length);
    q.buffer().putInt(at, body.length).put(at + 4, (byte) version).put(at + 5, (byte) kind)
        .putShort(at + 6, (short) 0).put(at + 8, body);
    q.commit(8 + body.length);
    return q;
  }

  private static List<String> decodeAll(ByteQueue q) throws RdmamsgException {
    Recorder r = new Recorder();
    Frames.Decoder d = new Frames.Decoder(r);
    for (int n; (n = d.decode(q, 1 << 20)) > 0;) q.consume(n);
    return r.events;
  }

  @Test
  void sendFramesCarryIdNamesAndPayload() {
    ByteQueue q = new ByteQueue(8);
    Frames.sendHeader(q, 7, "beta", "inbox", "", 5);
    Frames.payload(q, ByteBuffer.wrap("hello".getBytes(StandardCharsets.UTF_8)));
    ByteBuffer b = q.buffer();
    int at = q.start();
    assertEquals(8 + 8 + 5 + 6 + 1, Frames.sendHeaderSize("beta", "inbox", ""));
    assertEquals(8 + 5 + 6 + 1 + 5, b.getInt(at));
    assertEquals(8 + 8 + 5 + 6 + 1 + 5, q.size());
    assertEquals(2, b.get(at + 4));
    assertEquals(Frames.SEND, b.get(at + 5));
    assertEquals(7, b.getLong(at + 8));
    assertEquals(4, b.get(at + 16));
    assertEquals('h', b.get(q.start() + q.size() - 5));
  }

  @Test
  void framesAreWholeWhenTheQueueGrowsForThem() {
    ByteQueue q = new ByteQueue(8); // too small for either frame: it grows for each
    Frames.consumed(q, 42);
    assertEquals(42, q.buffer().getLong(q.start() + 8));
    q.consume(16);
    Frames.consumed(q, 43);
    Frames.serviceFrame(q, Frames.REGISTER, "orders");
    ByteBuffer b = q.buffer();
    assertEquals(43, b.getLong(q.start() + 8));
    assertEquals(6, b.get(q.start() + 16 + 8));
    assertEquals('s', b.get(q.start() + 16 + 8 + 6));
  }

  @Test
  void daemonFramesAreDecodedAcrossPartialReads() throws RdmamsgException {
    ByteQueue whole = frame(2, Frames.DELIVER, FakeDaemon.body("alpha", "", "inbox",
        "hi".getBytes(StandardCharsets.UTF_8)));
    ByteQueue q = new ByteQueue(4);
    Recorder r = new Recorder();
    Frames.Decoder d = new Frames.Decoder(r);
    for (int i = 0; i < whole.size(); i++) {
      int at = q.reserve(1);
      q.buffer().put(at, whole.buffer().get(whole.start() + i));
      q.commit(1);
      int n = d.decode(q, 1 << 20);
      if (i < whole.size() - 1) assertEquals(0, n, "decoded before the frame was complete");
      else q.consume(n);
    }
    assertEquals(List.of("deliver alpha/->inbox hi"), r.events);
    assertTrue(q.isEmpty());
  }

  @Test
  void everyDaemonFrameKindIsDecoded() throws RdmamsgException {
    assertEquals(List.of("welcome 4096 alpha"),
        decodeAll(frame(2, Frames.WELCOME, FakeDaemon.body(4096, "alpha"))));
    assertEquals(List.of("registered inbox"),
        decodeAll(frame(2, Frames.REGISTERED, FakeDaemon.body("inbox"))));
    assertEquals(List.of("ack 1+3", "ack 18446744073709551615+1"), decodeAll(frame(2, Frames.ACK,
        FakeDaemon.body(2, 1L, 3, -1L, 1))));
    assertEquals(List.of("error 9 unknown_node 6 no gamma"), decodeAll(frame(2, Frames.ERROR,
        FakeDaemon.body(9L, (short) 1, (byte) 6, (short) 8, "no gamma".getBytes()))));
    assertEquals(List.of("status {}"), decodeAll(frame(2, Frames.STATUS_REPLY, "{}".getBytes())));
    assertEquals(List.of("bye"), decodeAll(frame(2, Frames.BYE, new byte[0])));
    assertEquals(List.of("hold beta/slow"),
        decodeAll(frame(2, Frames.HOLD, FakeDaemon.body("beta", "slow"))));
    assertEquals(List.of("resume beta/slow"),
        decodeAll(frame(2, Frames.RESUME, FakeDaemon.body("beta", "slow"))));
  }

  @Test
  void subjectFramesAreEncodedAsTheDaemonReadsThem() {
    ByteQueue q = new ByteQueue(8);
    SubjectFrames.sub(q, 3, SlowConsumer.BLOCK, 100, "g", "a.*");
    ByteBuffer b = q.buffer();
    int at = q.start();
    assertEquals(8 + 1 + 1 + 4 + 2 + 1 + 3, b.getInt(at));
    assertEquals(Frames.SUB, b.get(at + 5));
    assertEquals(3, b.getLong(at + 8));
    assertEquals(1, b.get(at + 16));
    assertEquals(100, b.getInt(at + 18));
    assertEquals('g', b.get(at + 23));
    assertEquals('*', b.get(at + 27));
    q.consume(8 + b.getInt(at));
    SubjectFrames.pub(q, 4, 250, "a.b", ByteBuffer.wrap(new byte[] {9, 8}));
    b = q.buffer();
    at = q.start();
    assertEquals(8 + 4 + 1 + 3 + 2, b.getInt(at));
    assertEquals(Frames.PUB, b.get(at + 5));
    assertEquals(250, b.getInt(at + 16));
    assertEquals(9, b.get(at + 8 + 16));
    assertEquals(8, b.get(at + 8 + 17));
    q.consume(8 + b.getInt(at));
    SubjectFrames.respond(q, 5, "n/1/2", ByteBuffer.allocate(0));
    SubjectFrames.unsub(q, 3);
    b = q.buffer();
    at = q.start();
    assertEquals(8 + 1 + 5, b.getInt(at));
    assertEquals(Frames.RESPOND, b.get(at + 5));
    assertEquals('n', b.get(at + 17));
    at += 8 + 14;
    assertEquals(8, b.getInt(at));
    assertEquals(Frames.UNSUB, b.get(at + 5));
    assertEquals(3, b.getLong(at + 8));
  }

  @Test
  void subjectFramesFromTheDaemonAreDecoded() throws RdmamsgException {
    assertEquals(List.of("subscribed 7"),
        decodeAll(frame(2, Frames.SUBSCRIBED, FakeDaemon.body(7L))));
    assertEquals(List.of("pub_ack 9 no_subscribers 0/0/0 none"), decodeAll(frame(2,
        Frames.PUB_ACK, FakeDaemon.body(9L, (short) 15, 0, 0, 0, (short) 4, "none".getBytes()))));
    assertEquals(List.of("pub_ack 10 ok 3/2/1 "), decodeAll(frame(2, Frames.PUB_ACK,
        FakeDaemon.body(10L, (short) 0, 3, 2, 1, (short) 0))));
    assertEquals(List.of("msg 2 beta orders.x [beta/1/5] hi"), decodeAll(frame(2, Frames.MSG,
        FakeDaemon.body(2L, "beta", "orders.x", "beta/1/5", "hi".getBytes()))));
    assertEquals(List.of("reply 5 gamma noon"),
        decodeAll(frame(2, Frames.REPLY, FakeDaemon.body(5L, "gamma", "noon".getBytes()))));
  }

  @Test
  void subjectFramesBreakingARuleAreProtocolErrors() {
    for (int kind : new int[] {Frames.SUB, Frames.UNSUB, Frames.PUB, Frames.RESPOND}) {
      assertTrue(protocolError(frame(2, kind, new byte[8])).contains("client frame"));
    }
    assertTrue(protocolError(frame(2, Frames.SUBSCRIBED, new byte[9])).contains("trailing"));
    assertTrue(protocolError(frame(2, Frames.PUB_ACK, FakeDaemon.body(1L, (short) 13, 0, 0, 0,
        (short) 0))).contains("unknown error code 13"));
    assertTrue(protocolError(frame(2, Frames.PUB_ACK, FakeDaemon.body(1L, (short) 0, 0, 0, 0,
        (short) 5))).contains("runs past"));
    assertTrue(protocolError(frame(2, Frames.MSG, FakeDaemon.body(1L, "bad node", "x", "")))
        .contains("source node"));
    assertTrue(protocolError(frame(2, Frames.REPLY, FakeDaemon.body(1L))).contains("missing"));
  }

  private static String protocolError(ByteQueue q) {
    RdmamsgException e = assertThrows(RdmamsgException.class, () -> decodeAll(q));
    assertEquals(Errc.PROTOCOL_ERROR, e.errc());
    return e.getMessage();
  }

  @Test
  void framesBreakingARuleAreProtocolErrorsNamingIt() {
    assertTrue(protocolError(frame(1, Frames.BYE, new byte[0]))
        .contains("rdmamsgd speaks local protocol version 1, this client 2"));
    assertTrue(protocolError(frame(2, 26, new byte[0])).contains("unknown frame kind"));
    assertTrue(protocolError(frame(2, Frames.SEND, new byte[0])).contains("client frame"));
    assertTrue(protocolError(frame(2, Frames.CONSUMED, new byte[8])).contains("client frame"));
    assertTrue(protocolError(frame(2, Frames.BYE, new byte[1])).contains("trailing"));
    assertTrue(protocolError(frame(2, Frames.ACK, FakeDaemon.body(1, 0L, 1))).contains("range"));
    assertTrue(protocolError(frame(2, Frames.ACK, FakeDaemon.body(1, -1L, 2))).contains("range"));
    assertTrue(protocolError(frame(2, Frames.ACK, FakeDaemon.body(1, 5L, 0))).contains("range"));
    assertTrue(protocolError(frame(2, Frames.ERROR,
        FakeDaemon.body(1L, (short) 13, (byte) 6, (short) 0))).contains("unknown error code"));
    assertTrue(protocolError(frame(2, Frames.ERROR,
        FakeDaemon.body(1L, (short) 17, (byte) 6, (short) 0))).contains("unknown error code"));
    assertTrue(protocolError(frame(2, Frames.HOLD, FakeDaemon.body("beta", "bad name")))
        .contains("service name"));
    assertTrue(protocolError(frame(2, Frames.DELIVER, FakeDaemon.body("alpha", "x", "")))
        .contains("destination service"));
    ByteQueue big = frame(2, Frames.STATUS_REPLY, new byte[0]);
    big.buffer().putInt(big.start(), (1 << 20) + 1); // announced, never sent
    assertTrue(protocolError(big).contains("longer than the maximum"));
  }

  @Test
  void namesAreCheckedLikeTheDaemonDoes() {
    assertTrue(Frames.isValidName("a.b_c-D9"));
    assertTrue(Frames.isValidName("x".repeat(63)));
    assertFalse(Frames.isValidName("x".repeat(64)));
    assertFalse(Frames.isValidName(""));
    assertFalse(Frames.isValidName("a/b"));
    assertFalse(Frames.isValidName("é"));
  }

  @Test
  void completionRangesAreHandedOutOneIdAtATimeAndByIdSplittingThem() {
    CompletionQueue q = new CompletionQueue();
    q.add(1, 5, Errc.OK, "");
    q.add(9, 1, Errc.TIMEOUT, "late");
    assertEquals(new Completion(3, Errc.OK, ""), q.take(3));
    assertEquals(new Completion(9, Errc.TIMEOUT, "late"), q.take(9));
    assertNull(q.take(3));
    assertNull(q.take(6));
    List<Long> order = new ArrayList<>();
    for (Completion c; (c = q.poll()) != null;) order.add(c.msgId());
    assertEquals(List.of(1L, 2L, 4L, 5L), order);
    assertTrue(q.isEmpty());
  }

  @Test
  void theByteQueueGrowsAndCompactsKeepingItsBytes() {
    ByteQueue q = new ByteQueue(8);
    for (int i = 0; i < 1000; i++) {
      int at = q.reserve(3);
      q.buffer().put(at, (byte) i).put(at + 1, (byte) (i >> 8)).put(at + 2, (byte) 7);
      q.commit(3);
      if (i % 3 == 0) {
        assertEquals(7, q.buffer().get(q.start() + 2));
        q.consume(3);
      }
    }
    assertEquals(3 * 1000 - 3 * 334, q.size());
  }

  @Test
  void errcNamesAndValuesAreTheProtocols() {
    assertEquals("unknown_service", Errc.UNKNOWN_SERVICE.toString());
    assertEquals(14, Errc.PERMISSION_DENIED.value());
    assertEquals(Errc.WOULD_BLOCK, Errc.fromValue(13));
    assertEquals(Errc.NO_SUBSCRIBERS, Errc.fromValue(15));
    assertEquals("no_responders", Errc.fromValue(16).toString());
    assertNull(Errc.fromValue(17));
    assertEquals("too_large: 9 bytes", new RdmamsgException(Errc.TOO_LARGE, "9 bytes")
        .getMessage());
  }
}
