package org.rdmamsg;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The socket transport over a real Unix socket, the test playing the daemon:
 * frames out and in, the limit on a frame's length, a large direct payload
 * written from where it is, and the reason a connection ends with.
 */
@Timeout(60)
class SocketTransportTest {
  private ClientParts parts;
  private SocketTransport transport;
  private FakeDaemon daemon;

  @BeforeEach
  void connect() throws Exception {
    parts = new ClientParts();
    transport = parts.transport;
    daemon = parts.daemon;
  }

  @AfterEach
  void close() throws Exception {
    parts.close();
  }

  /** Reads until the transport throws; that error. */
  private RdmamsgException readUntilItEnds() throws Exception {
    RdmamsgException[] ended = new RdmamsgException[1];
    assertTrue(Wait.until(() -> {
      try {
        transport.read();
        return false;
      } catch (RdmamsgException e) {
        ended[0] = e;
        return true;
      }
    }), "the connection did not end");
    return ended[0];
  }

  /** A DELIVER body of any size (FakeDaemon.body is for small ones). */
  private static byte[] deliverBody(int payload) {
    ByteBuffer b = ByteBuffer.allocate(3 + 5 + 5 + payload).order(ByteOrder.LITTLE_ENDIAN);
    b.put((byte) 5).put("alpha".getBytes(StandardCharsets.US_ASCII)).put((byte) 0)
        .put((byte) 5).put("inbox".getBytes(StandardCharsets.US_ASCII));
    return b.array();
  }

  @Test
  void framesQueuedGoOutAndFramesReadReachTheParts() throws Exception {
    Frames.statusRequest(transport.out());
    assertEquals(Frames.HEADER, transport.unwritten());
    transport.write();
    assertEquals(0, transport.unwritten());
    assertEquals(Frames.STATUS_REQUEST, daemon.read().kind());
    daemon.welcome(4096, "fake");
    daemon.deliver("alpha", "", "inbox", "one");
    daemon.deliver("alpha", "", "inbox", "two");
    assertTrue(Wait.until(() -> {
      transport.read();
      return parts.inbox.size() == 2;
    }));
    assertEquals("fake", parts.handshake.nodeName());
    assertEquals("one", parts.inbox.take().text());
  }

  @Test
  void theDaemonClosingItsEndIsNotConnected() throws Exception {
    daemon.drop();
    RdmamsgException e = readUntilItEnds();
    assertEquals(Errc.NOT_CONNECTED, e.errc());
    assertTrue(e.getMessage().contains("rdmamsgd closed the connection"), e.getMessage());
  }

  @Test
  void aWriteThatFailsEndsWithWhatTheDaemonSaidBeforeItClosed() throws Exception {
    daemon.error(0, Errc.SHUTTING_DOWN, 0, "rdmamsgd is stopping");
    daemon.hangUp();
    RdmamsgException[] ended = new RdmamsgException[1];
    assertTrue(Wait.until(() -> {
      Frames.statusRequest(transport.out());
      try {
        transport.write();
        return false;
      } catch (RdmamsgException e) {
        ended[0] = e;
        return true;
      }
    }), "writing to a closed socket never failed");
    assertEquals(Errc.SHUTTING_DOWN, ended[0].errc());
    assertEquals("rdmamsgd is stopping", ended[0].detail());
  }

  @Test
  void aFrameLongerThanTheLimitBeforeTheWelcomeIsAProtocolError() throws Exception {
    CompletableFuture<Void> sent = CompletableFuture.runAsync(() -> {
      try {
        daemon.frame(Frames.DELIVER, deliverBody(2 << 20));
      } catch (Exception e) {
        // the client closed without reading it all: expected
      }
    });
    RdmamsgException e = readUntilItEnds();
    assertEquals(Errc.PROTOCOL_ERROR, e.errc());
    assertTrue(e.getMessage().contains("longer than the maximum"), e.getMessage());
    parts.lose(e);
    sent.get(FakeDaemon.WAIT.toSeconds(), TimeUnit.SECONDS);
  }

  @Test
  void aWelcomeRaisesTheLimitForTheFramesThatFollowItInTheSameRead() throws Exception {
    CompletableFuture<Void> sent = CompletableFuture.runAsync(() -> {
      try {
        daemon.frames(Frames.WELCOME, FakeDaemon.body(4 << 20, "fake"), Frames.DELIVER,
            deliverBody(2 << 20));
      } catch (Exception e) {
        throw new RuntimeException(e);
      }
    });
    assertTrue(Wait.until(() -> {
      transport.read();
      return !parts.inbox.isEmpty();
    }));
    assertEquals(2 << 20, parts.inbox.take().payload().remaining());
    sent.get(FakeDaemon.WAIT.toSeconds(), TimeUnit.SECONDS);
  }

  @Test
  void aLargeDirectPayloadGoesOutWholeAfterWhatWasQueuedBeforeIt() throws Exception {
    ByteBuffer small = ByteBuffer.wrap("first".getBytes(StandardCharsets.UTF_8));
    ByteBuffer large = ByteBuffer.allocateDirect(512 * 1024);
    for (int i = 0; i < large.capacity(); i++) large.put(i, (byte) (i * 31));
    large.position(3); // only the remaining bytes are sent
    CompletableFuture<FakeDaemon.Frame[]> read = CompletableFuture.supplyAsync(() -> {
      try {
        return new FakeDaemon.Frame[] {daemon.read(), daemon.read(), daemon.read()};
      } catch (Exception e) {
        throw new RuntimeException(e);
      }
    });
    transport.queueSend(1, "beta", "inbox", "orders", large); // nothing queued: written from there
    transport.queueSend(2, "beta", "inbox", "", small);
    transport.queueSend(3, "beta", "inbox", "", large.duplicate()); // behind queued bytes: copied
    assertTrue(Wait.until(() -> {
      transport.write();
      return transport.unwritten() == 0;
    }));
    FakeDaemon.Frame[] frames = read.get(FakeDaemon.WAIT.toSeconds(), TimeUnit.SECONDS);
    assertEquals(3, large.position(), "send moved the payload's position");
    for (int f = 0; f < 3; f++) {
      FakeDaemon.Frame frame = frames[f];
      assertEquals(Frames.SEND, frame.kind());
      assertEquals(f + 1, frame.u64(0));
      assertEquals("beta", frame.str8(8));
      assertEquals("inbox", frame.str8(13));
      String from = frame.str8(19);
      assertEquals(f == 0 ? "orders" : "", from);
      ByteBuffer payload = frame.body().position(20 + from.length());
      ByteBuffer expected = f == 1 ? small.duplicate() : large.duplicate();
      assertEquals(expected, payload, "frame " + (f + 1) + "'s payload");
    }
  }
}
