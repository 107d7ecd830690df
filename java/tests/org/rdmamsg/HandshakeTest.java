package org.rdmamsg;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import org.junit.jupiter.api.Test;

/** The handshake: the HELLO sent, and the limits taken from the WELCOME. */
class HandshakeTest {
  @Test
  void helloIsAVersionTwoFrameWithTheClientNameCutTo63Bytes() {
    ByteQueue out = new ByteQueue(16);
    new Handshake().hello(out, "x".repeat(70));
    ByteBuffer b = out.buffer();
    int at = out.start();
    assertEquals(1 + 63, b.getInt(at));
    assertEquals(Frames.VERSION, b.get(at + 4));
    assertEquals(Frames.HELLO, b.get(at + 5));
    assertEquals(63, b.get(at + 8));
    assertEquals(8 + 1 + 63, out.size());
  }

  @Test
  void beforeTheWelcomeFramesUpToTheDefaultLimitAreTaken() {
    Handshake h = new Handshake();
    assertFalse(h.isDone());
    assertEquals("", h.nodeName());
    assertEquals(Frames.DEFAULT_MAX_BODY, h.maxBody());
  }

  @Test
  void theWelcomeGivesTheNodeTheMaximumMessageAndTheFrameLimit() {
    Handshake small = new Handshake();
    small.welcome(4096, "alpha");
    assertTrue(small.isDone());
    assertEquals("alpha", small.nodeName());
    assertEquals(4096, small.maxMessage());
    assertEquals(Frames.DEFAULT_MAX_BODY, small.maxBody()); // never below the default

    Handshake large = new Handshake();
    large.welcome(16 << 20, "beta");
    assertEquals(16 << 20, large.maxMessage());
    assertEquals((16 << 20) + Frames.MAX_RECEIVE_OVERHEAD, large.maxBody());
  }

  @Test
  void aMaximumBeyondWhatAnIntHoldsIsCutToWhatAFrameCanCarry() {
    Handshake h = new Handshake();
    h.welcome(-1, "alpha"); // 2^32 - 1, unsigned on the wire
    assertEquals(Integer.MAX_VALUE - 16, h.maxBody());
    assertEquals(Integer.MAX_VALUE - Frames.MAX_RECEIVE_OVERHEAD - 16, h.maxMessage());
  }
}
