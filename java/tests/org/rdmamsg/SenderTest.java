package org.rdmamsg;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The way of a message out: ids without gaps, nothing queued for a send that
 * was refused or would block, a held destination waited for, and the
 * socket's backpressure.
 */
@Timeout(60)
class SenderTest {
  private static final long SECONDS = FakeDaemon.WAIT.toSeconds();
  private ClientParts parts;
  private FakeDaemon daemon;

  @BeforeEach
  void connect() throws Exception {
    parts = new ClientParts();
    daemon = parts.daemon;
    parts.handshake.welcome(4096, "fake");
  }

  @AfterEach
  void close() throws Exception {
    parts.close();
  }

  private long send(String node, String service, int size, boolean mayWait)
      throws RdmamsgException {
    parts.engine.lock();
    try {
      return parts.sender.send(node, service, ByteBuffer.allocate(size), "", mayWait, null);
    } finally {
      parts.engine.unlock();
    }
  }

  private void flush() throws Exception {
    parts.engine.lock();
    try {
      assertTrue(parts.engine.await(() -> parts.transport.unwritten() == 0,
          Deadline.after(FakeDaemon.WAIT)));
    } finally {
      parts.engine.unlock();
    }
  }

  /** The id of the next SEND the daemon reads. */
  private long nextSend() throws Exception {
    FakeDaemon.Frame f = daemon.read();
    assertEquals(Frames.SEND, f.kind());
    return f.u64(0);
  }

  @Test
  void sendsRefusedOrThatWouldBlockUseNoIdAndQueueNothing() throws Exception {
    assertEquals(Errc.TOO_LARGE,
        assertThrows(RdmamsgException.class, () -> send("beta", "inbox", 4097, true))
            .errc());
    assertEquals(Errc.BAD_REQUEST,
        assertThrows(RdmamsgException.class, () -> send("beta", "in box", 1, true)).errc());
    parts.holds.hold("beta", "slow");
    assertEquals(Client.WOULD_BLOCK, send("beta", "slow", 1, false));
    assertEquals(0, parts.transport.unwritten());
    assertEquals(1, send("beta", "fast", 1, true)); // another destination goes on
    assertEquals(2, send("beta", "inbox", 4096, true)); // the largest the daemon takes
    assertEquals(2, parts.completions.inFlight());
    flush();
    assertEquals(1, nextSend());
    assertEquals(2, nextSend());
  }

  @Test
  void aSendToAHeldDestinationWaitsForItsResume() throws Exception {
    parts.holds.hold("beta", "slow");
    CompletableFuture<Long> sent = CompletableFuture.supplyAsync(() -> {
      try {
        return send("beta", "slow", 8, true);
      } catch (RdmamsgException e) {
        throw new RuntimeException(e);
      }
    });
    assertEquals(null, daemon.read(Duration.ofMillis(100)), "a held destination was sent to");
    assertFalse(sent.isDone());
    daemon.resume("beta", "slow");
    assertEquals(1, sent.get(SECONDS, TimeUnit.SECONDS));
    flush();
    assertEquals(1, nextSend());
  }

  @Test
  void trySendWouldBlockWhileMoreThanTheLimitIsUnwritten() throws Exception {
    parts.handshake.welcome(1 << 20, "fake");
    int queued = 0;
    for (int i = 0; i < 1000; i++) { // the daemon reads nothing meanwhile
      long id = send("beta", "inbox", 64 * 1024, false);
      if (id == Client.WOULD_BLOCK) break;
      assertEquals(++queued, id);
    }
    assertTrue(parts.transport.unwritten() >= Sender.WRITE_BLOCK_LIMIT,
        parts.transport.unwritten() + " bytes unwritten at WOULD_BLOCK");
    final int expected = queued;
    CompletableFuture<Integer> drained = CompletableFuture.supplyAsync(() -> {
      try {
        int n = 0;
        while (n < expected) {
          assertEquals(n + 1, nextSend());
          n++;
        }
        return n;
      } catch (Exception e) {
        throw new RuntimeException(e);
      }
    });
    flush();
    assertEquals(expected, drained.get(SECONDS, TimeUnit.SECONDS));
    assertEquals(expected + 1, send("beta", "inbox", 64 * 1024, false));
  }
}
