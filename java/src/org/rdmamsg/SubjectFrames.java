package org.rdmamsg;

import java.nio.ByteBuffer;

/**
 * The local protocol's subject frames (docs/protocol.md, "Frames" 18-25,
 * and "Subjects"): the encoders of SUB, UNSUB, PUB and RESPOND, and the
 * decoding of SUBSCRIBED, PUB_ACK, MSG and REPLY for {@link Frames.Decoder}.
 * Subjects, patterns and reply tokens are checked by their users before
 * they are encoded (one byte per character, at most 255).
 */
final class SubjectFrames {
  private SubjectFrames() {}

  // --- encoders -------------------------------------------------------------------

  static void sub(ByteQueue q, long subId, SlowConsumer policy, int pendingLimit, String group,
      String pattern) {
    int at = Frames.header(q, Frames.SUB, 8 + 1 + 1 + 4 + 2 + group.length() + pattern.length());
    ByteBuffer b = q.buffer();
    b.putLong(at, subId);
    b.put(at + 8, (byte) policy.value());
    b.put(at + 9, (byte) 0);
    b.putInt(at + 10, pendingLimit);
    Frames.putName(b, Frames.putName(b, at + 14, group), pattern);
  }

  static void unsub(ByteQueue q, long subId) {
    int at = Frames.header(q, Frames.UNSUB, 8); // first: it may grow the buffer
    q.buffer().putLong(at, subId);
  }

  /** A PUB frame: its fields, then the remaining bytes of {@code payload}. */
  static void pub(ByteQueue q, long msgId, int timeoutMs, String subject, ByteBuffer payload) {
    int at = Frames.header(q, Frames.PUB, pubFields(subject) + payload.remaining());
    ByteBuffer b = q.buffer();
    b.putLong(at, msgId);
    b.putInt(at + 8, timeoutMs);
    int p = Frames.putName(b, at + 12, subject);
    b.put(p, payload, payload.position(), payload.remaining());
  }

  /** A RESPOND frame: its fields, then the remaining bytes of {@code payload}. */
  static void respond(ByteQueue q, long msgId, String replyTo, ByteBuffer payload) {
    int at = Frames.header(q, Frames.RESPOND, respondFields(replyTo) + payload.remaining());
    ByteBuffer b = q.buffer();
    b.putLong(at, msgId);
    int p = Frames.putName(b, at + 8, replyTo);
    b.put(p, payload, payload.position(), payload.remaining());
  }

  /** A PUB's body bytes beside its payload. */
  static int pubFields(String subject) {
    return 8 + 4 + 1 + subject.length();
  }

  /** A RESPOND's body bytes beside its payload. */
  static int respondFields(String replyTo) {
    return 8 + 1 + replyTo.length();
  }

  // --- decoding -------------------------------------------------------------------

  /** Decodes the body of a daemon's subject frame of {@code kind} and hands it to {@code h}. */
  static void decode(Frames.Decoder d, int kind, Frames.Handler h) throws RdmamsgException {
    switch (kind) {
      case Frames.SUBSCRIBED -> {
        long subId = d.u64("subscribed: subscription id");
        d.expectEnd();
        h.subscribed(subId);
      }
      case Frames.PUB_ACK -> pubAck(d, h);
      case Frames.MSG -> {
        long subId = d.u64("msg: subscription id");
        String node = d.name("msg: source node name", false, 3);
        String subject = d.str8("msg: subject", 4);
        String replyTo = d.str8("msg: reply token", -1);
        h.msg(subId, node, subject, replyTo, d.buffer(), d.position(), d.remaining());
      }
      case Frames.REPLY -> {
        long requestId = d.u64("reply: request id");
        String node = d.name("reply: source node name", false, 3);
        h.reply(requestId, node, d.buffer(), d.position(), d.remaining());
      }
      default -> throw Frames.Decoder.protocol("not a subject frame: " + Frames.kindName(kind));
    }
  }

  private static void pubAck(Frames.Decoder d, Frames.Handler h) throws RdmamsgException {
    long msgId = d.u64("pub ack: message id");
    int code = d.u16("pub ack: code");
    int matched = d.u32("pub ack: matched");
    int taken = d.u32("pub ack: taken");
    int dropped = d.u32("pub ack: dropped");
    String text = d.str16("pub ack: text");
    d.expectEnd();
    Errc errc = Errc.fromValue(code);
    if (errc == null || errc == Errc.WOULD_BLOCK) {
      throw Frames.Decoder.protocol("pub ack: unknown error code " + code);
    }
    h.pubAck(msgId, errc, matched, taken, dropped, text);
  }
}
