package org.rdmamsg;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/**
 * The local protocol's frames (docs/protocol.md, "Local client protocol"),
 * version 2: an 8-byte header ({@code u32 bodyLength, u8 version, u8 kind,
 * u16 reserved}, little-endian) and a body. The encoders append one frame to
 * a {@link ByteQueue}; {@link Decoder} takes frames off the front of one.
 */
final class Frames {
  static final int VERSION = 2;
  static final int HEADER = 8;
  static final int MAX_NAME = 63;
  /**
   * Body bytes a frame the daemon takes may have beside its payload: its
   * limit is the maximum message size plus these.
   */
  static final int MAX_FRAME_OVERHEAD = 1024;
  /**
   * Body bytes a frame from the daemon may have beside its payload: a MSG's
   * fields take up to 8 + 64 + 256 + 256, more than a SEND's.
   */
  static final int MAX_RECEIVE_OVERHEAD = 1024;
  /** The limit on a frame body before WELCOME names the daemon's. */
  static final int DEFAULT_MAX_BODY = 1 << 20;

  static final int HELLO = 1;
  static final int WELCOME = 2;
  static final int REGISTER = 3;
  static final int REGISTERED = 4;
  static final int UNREGISTER = 5;
  static final int SEND = 6;
  static final int DELIVER = 7;
  static final int ACK = 8;
  static final int ERROR = 9;
  static final int STATUS_REQUEST = 10;
  static final int STATUS_REPLY = 11;
  static final int BYE = 12;
  static final int CONSUMED = 13;
  static final int HOLD = 14;
  static final int RESUME = 15;
  static final int SHM_OFFER = 16;
  static final int SHM_ACCEPT = 17;
  // Subjects (SubjectFrames).
  static final int SUB = 18;
  static final int SUBSCRIBED = 19;
  static final int UNSUB = 20;
  static final int PUB = 21;
  static final int PUB_ACK = 22;
  static final int MSG = 23;
  static final int RESPOND = 24;
  static final int REPLY = 25;
  static final int MAX_KIND = REPLY;

  private static final String[] KIND_NAMES = {"0", "HELLO", "WELCOME", "REGISTER", "REGISTERED",
      "UNREGISTER", "SEND", "DELIVER", "ACK", "ERROR", "STATUS_REQUEST", "STATUS_REPLY", "BYE",
      "CONSUMED", "HOLD", "RESUME", "SHM_OFFER", "SHM_ACCEPT", "SUB", "SUBSCRIBED", "UNSUB", "PUB",
      "PUB_ACK", "MSG", "RESPOND", "REPLY"};

  private Frames() {}

  static String kindName(int kind) {
    return kind > 0 && kind <= MAX_KIND ? KIND_NAMES[kind] : "kind " + kind;
  }

  private static boolean isNameChar(int c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.'
        || c == '_' || c == '-';
  }

  /** Node and service names: 1 to 63 characters of {@code [A-Za-z0-9._-]}. */
  static boolean isValidName(String name) {
    if (name == null || name.isEmpty() || name.length() > MAX_NAME) return false;
    for (int i = 0; i < name.length(); i++) {
      if (!isNameChar(name.charAt(i))) return false;
    }
    return true;
  }

  // --- encoders -------------------------------------------------------------------

  /** Reserves a frame of {@code body} bytes, writes its header; the index of the body. */
  static int header(ByteQueue q, int kind, int body) {
    int at = q.reserve(HEADER + body);
    ByteBuffer b = q.buffer();
    b.putInt(at, body);
    b.put(at + 4, (byte) VERSION);
    b.put(at + 5, (byte) kind);
    b.putShort(at + 6, (short) 0);
    q.commit(HEADER + body);
    return at + HEADER;
  }

  /** Writes a str8 of a name or subject (ASCII: one byte per character); the index after it. */
  static int putName(ByteBuffer b, int at, String s) {
    b.put(at++, (byte) s.length());
    for (int i = 0; i < s.length(); i++) b.put(at++, (byte) s.charAt(i));
    return at;
  }

  static void hello(ByteQueue q, String clientName) {
    byte[] name = clientName.getBytes(StandardCharsets.UTF_8);
    int n = Math.min(name.length, MAX_NAME);
    int at = header(q, HELLO, 1 + n);
    q.buffer().put(at, (byte) n);
    q.buffer().put(at + 1, name, 0, n);
  }

  static void serviceFrame(ByteQueue q, int kind, String service) {
    int at = header(q, kind, 1 + service.length()); // first: it may grow the buffer
    putName(q.buffer(), at, service);
  }

  /** The SEND frame's bytes before the payload. */
  static int sendHeaderSize(String node, String service, String fromService) {
    return HEADER + 8 + 3 + node.length() + service.length() + fromService.length();
  }

  /**
   * Appends a SEND frame whose payload is {@code payloadLength} bytes, all
   * but the payload itself; the caller appends the payload (or writes it
   * straight to the socket).
   */
  static void sendHeader(ByteQueue q, long msgId, String node, String service, String fromService,
      int payloadLength) {
    int fields = 8 + 3 + node.length() + service.length() + fromService.length();
    int at = q.reserve(HEADER + fields);
    ByteBuffer b = q.buffer();
    b.putInt(at, fields + payloadLength);
    b.put(at + 4, (byte) VERSION);
    b.put(at + 5, (byte) SEND);
    b.putShort(at + 6, (short) 0);
    b.putLong(at + 8, msgId);
    int p = putName(b, at + 16, node);
    p = putName(b, p, service);
    putName(b, p, fromService);
    q.commit(HEADER + fields);
  }

  /** Appends the remaining bytes of {@code payload} (its position is not moved). */
  static void payload(ByteQueue q, ByteBuffer payload) {
    int n = payload.remaining();
    int at = q.reserve(n);
    q.buffer().put(at, payload, payload.position(), n);
    q.commit(n);
  }

  static void consumed(ByteQueue q, long taken) {
    int at = header(q, CONSUMED, 8); // first: it may grow the buffer
    q.buffer().putLong(at, taken);
  }

  static void statusRequest(ByteQueue q) {
    header(q, STATUS_REQUEST, 0);
  }

  static void bye(ByteQueue q) {
    header(q, BYE, 0);
  }

  // --- decoder --------------------------------------------------------------------

  /**
   * What a client does with the frames a daemon sends. A frame the client
   * cannot take (a reply nobody asked for, a connection-level error, BYE)
   * throws the error that ends the connection; the decoder passes it on.
   */
  interface Handler {
    void welcome(int maxMessageSize, String nodeName);

    void registered(String service) throws RdmamsgException;

    /** The payload is {@code length} bytes at {@code offset} of {@code buf}, valid during the call. */
    void deliver(String srcNode, String srcService, String toService, ByteBuffer buf, int offset,
        int length);

    void ack(long firstMsgId, long count);

    void error(long msgId, Errc errc, int inReplyTo, String text) throws RdmamsgException;

    void statusReply(String json) throws RdmamsgException;

    void bye() throws RdmamsgException;

    void hold(String node, String service);

    void resume(String node, String service);

    /** SUBSCRIBED: subscription {@code subId} holds. */
    void subscribed(long subId) throws RdmamsgException;

    /** PUB_ACK: the outcome of publish (or request) {@code msgId}; the counts are unsigned. */
    void pubAck(long msgId, Errc errc, int matched, int taken, int dropped, String text);

    /**
     * MSG: a message published to {@code subject} for subscription {@code
     * subId}; {@code replyTo} is empty unless it is a request. The payload is
     * {@code length} bytes at {@code offset} of {@code buf}, valid during the call.
     */
    void msg(long subId, String srcNode, String subject, String replyTo, ByteBuffer buf,
        int offset, int length);

    /** REPLY: the reply to request {@code requestId}; the payload as for {@link #msg}. */
    void reply(long requestId, String srcNode, ByteBuffer buf, int offset, int length);
  }

  /**
   * Decodes daemon frames. Every length is checked against what is there and
   * against the limit before it is used; a frame that breaks a rule is a
   * {@link Errc#PROTOCOL_ERROR} naming the rule.
   */
  static final class Decoder {
    private final Handler handler;
    // The names of the last DELIVER (slots 0-2), and the node and subject of
    // the last MSG (3, 4): a stream's names repeat, so they are compared
    // rather than decoded into new strings.
    private final String[] lastNames = new String[5];
    private ByteBuffer b;
    private int pos;
    private int end;

    Decoder(Handler handler) {
      this.handler = handler;
    }

    /**
     * Decodes and handles the frame at the front of {@code q}; its size, or 0
     * if it is not complete yet (nothing is consumed).
     */
    int decode(ByteQueue q, int maxBody) throws RdmamsgException {
      if (q.size() < HEADER) return 0;
      b = q.buffer();
      final int at = q.start();
      final long length = Integer.toUnsignedLong(b.getInt(at));
      final int version = b.get(at + 4) & 0xff;
      final int kind = b.get(at + 5) & 0xff;
      final int reserved = b.getShort(at + 6) & 0xffff;
      if (version != VERSION) {
        throw protocol("rdmamsgd speaks local protocol version " + version + ", this client "
            + VERSION + ": use a client library and daemon of the same release");
      }
      if (reserved != 0) throw protocol("reserved header bits set");
      if (kind == 0 || kind > MAX_KIND) throw protocol("unknown frame kind " + kind);
      if (length > maxBody) {
        throw protocol("frame of " + length + " bytes, longer than the maximum " + maxBody);
      }
      if (q.size() - HEADER < length) return 0;
      pos = at + HEADER;
      end = pos + (int) length;
      body(kind);
      return HEADER + (int) length;
    }

    private void body(int kind) throws RdmamsgException {
      switch (kind) {
        case WELCOME -> {
          int max = u32("welcome: maximum message size");
          String node = name("welcome: node name", false, -1);
          expectEnd();
          handler.welcome(max, node);
        }
        case REGISTERED -> {
          String service = name("registered: service name", false, -1);
          expectEnd();
          handler.registered(service);
        }
        case DELIVER -> {
          String node = name("deliver: source node name", false, 0);
          String src = name("deliver: source service name", true, 1);
          String to = name("deliver: destination service name", false, 2);
          handler.deliver(node, src, to, b, pos, end - pos);
        }
        case ACK -> ack();
        case ERROR -> error();
        case STATUS_REPLY -> {
          byte[] json = new byte[end - pos];
          b.get(pos, json);
          handler.statusReply(new String(json, StandardCharsets.UTF_8));
        }
        case BYE -> {
          expectEnd();
          handler.bye();
        }
        case HOLD, RESUME -> {
          String node = name(kindName(kind) + ": node name", false, -1);
          String service = name(kindName(kind) + ": service name", false, -1);
          expectEnd();
          if (kind == HOLD) handler.hold(node, service);
          else handler.resume(node, service);
        }
        case SUBSCRIBED, PUB_ACK, MSG, REPLY -> SubjectFrames.decode(this, kind, handler);
        case SHM_ACCEPT ->
          throw protocol("rdmamsgd accepted shared memory, which this client never offers");
        default -> throw protocol("rdmamsgd sent a client frame (" + kindName(kind) + ")");
      }
    }

    private void ack() throws RdmamsgException {
      long count = Integer.toUnsignedLong(u32("ack: count"));
      if (count == 0 || (end - pos) % 12 != 0 || (end - pos) / 12 != count) {
        throw protocol("ack: count does not match the body length");
      }
      for (int at = pos; at < end; at += 12) {
        long first = b.getLong(at);
        long n = Integer.toUnsignedLong(b.getInt(at + 8));
        // The range first .. first + n - 1 must not run past 2^64 - 1.
        if (first == 0 || n == 0 || Long.compareUnsigned(first - 1, -1L - n) > 0) {
          throw protocol("ack: empty or overflowing range of message ids");
        }
      }
      for (int at = pos; at < end; at += 12) {
        handler.ack(b.getLong(at), Integer.toUnsignedLong(b.getInt(at + 8)));
      }
    }

    private void error() throws RdmamsgException {
      if (end - pos < 13) throw protocol("error: frame too short");
      long msgId = b.getLong(pos);
      int code = b.getShort(pos + 8) & 0xffff;
      int inReplyTo = b.get(pos + 10) & 0xff;
      int textLength = b.getShort(pos + 11) & 0xffff;
      pos += 13;
      if (end - pos != textLength) throw protocol("error: text length does not match the body");
      Errc errc = Errc.fromValue(code);
      if (errc == null || errc == Errc.OK || errc == Errc.WOULD_BLOCK) {
        throw protocol("error: unknown error code " + code);
      }
      if (inReplyTo > MAX_KIND) throw protocol("error: unknown request kind " + inReplyTo);
      byte[] text = new byte[textLength];
      b.get(pos, text);
      handler.error(msgId, errc, inReplyTo, new String(text, StandardCharsets.UTF_8));
    }

    int u32(String field) throws RdmamsgException {
      if (end - pos < 4) throw protocol(field + " missing");
      int v = b.getInt(pos);
      pos += 4;
      return v;
    }

    long u64(String field) throws RdmamsgException {
      if (end - pos < 8) throw protocol(field + " missing");
      long v = b.getLong(pos);
      pos += 8;
      return v;
    }

    int u16(String field) throws RdmamsgException {
      if (end - pos < 2) throw protocol(field + " missing");
      int v = b.getShort(pos) & 0xffff;
      pos += 2;
      return v;
    }

    /** A str8 of any bytes, one character per byte (ISO-8859-1); cached as {@link #name}. */
    String str8(String field, int cacheSlot) throws RdmamsgException {
      if (end - pos < 1) throw protocol(field + " missing");
      int n = b.get(pos) & 0xff;
      if (end - pos - 1 < n) throw protocol(field + " runs past the frame");
      int at = pos + 1;
      pos = at + n;
      if (n == 0) return "";
      if (cacheSlot >= 0) {
        String last = lastNames[cacheSlot];
        if (last != null && same(last, at, n)) return last;
      }
      byte[] bytes = new byte[n];
      b.get(at, bytes);
      String s = new String(bytes, StandardCharsets.ISO_8859_1);
      if (cacheSlot >= 0) lastNames[cacheSlot] = s;
      return s;
    }

    /** A str16 of UTF-8 text. */
    String str16(String field) throws RdmamsgException {
      int n = u16(field + " length");
      if (end - pos < n) throw protocol(field + " runs past the frame");
      byte[] text = new byte[n];
      b.get(pos, text);
      pos += n;
      return new String(text, StandardCharsets.UTF_8);
    }

    /** The frame's buffer: its body's rest is {@link #remaining()} bytes at {@link #position()}. */
    ByteBuffer buffer() {
      return b;
    }

    int position() {
      return pos;
    }

    int remaining() {
      return end - pos;
    }

    /** A str8 name; {@code cacheSlot} >= 0 reuses the last string decoded there. */
    String name(String field, boolean mayBeEmpty, int cacheSlot) throws RdmamsgException {
      if (end - pos < 1) throw protocol(field + " missing");
      int n = b.get(pos) & 0xff;
      if (end - pos - 1 < n) throw protocol(field + " runs past the frame");
      int at = pos + 1;
      pos = at + n;
      if (n == 0 && mayBeEmpty) return "";
      if (n == 0 || n > MAX_NAME) throw protocol("invalid " + field);
      if (cacheSlot >= 0) {
        String last = lastNames[cacheSlot];
        if (last != null && same(last, at, n)) return last;
      }
      char[] chars = new char[n];
      for (int i = 0; i < n; i++) {
        int c = b.get(at + i) & 0xff;
        if (!isNameChar(c)) throw protocol("invalid " + field);
        chars[i] = (char) c;
      }
      String s = new String(chars);
      if (cacheSlot >= 0) lastNames[cacheSlot] = s;
      return s;
    }

    private boolean same(String s, int at, int n) {
      if (s.length() != n) return false;
      for (int i = 0; i < n; i++) {
        if (s.charAt(i) != (b.get(at + i) & 0xff)) return false;
      }
      return true;
    }

    void expectEnd() throws RdmamsgException {
      if (pos != end) throw protocol("trailing bytes after the last field");
    }

    static RdmamsgException protocol(String why) {
      return new RdmamsgException(Errc.PROTOCOL_ERROR, why);
    }
  }
}
