package org.rdmamsg;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A listener that does not read holds back only its own destination: the
 * daemon holds it, {@code trySend} to it returns WOULD_BLOCK without queuing
 * while another service of the same node flows, and {@code send} waits for
 * the RESUME. Driven from a Selector, as an application's event loop would.
 */
@Timeout(120)
@ExtendWith(MeshExtension.class)
class BackpressureTest {
  static final Duration WAIT = Duration.ofSeconds(20);

  @Test
  void aHeldDestinationWouldBlockWhileAnotherServiceFlows() throws Exception {
    Mesh mesh = Mesh.builder("alpha", "beta")
        .with("flow_window: 64KiB\nsend_queue_limit: 64KiB").start();
    ByteBuffer payload = ByteBuffer.allocate(16 * 1024);
    try (Client slow = mesh.connect("beta"); Client fast = mesh.connect("beta");
         Client sender = mesh.connect("alpha"); Selector sel = Selector.open()) {
      slow.register("slow");
      fast.register("fast");
      sender.channel().register(sel, SelectionKey.OP_READ);

      // Fill the slow flow until the daemon holds it.
      int accepted = 0;
      long deadline = System.nanoTime() + WAIT.toNanos();
      while (!sender.isHeld("beta", "slow")) {
        assertTrue(System.nanoTime() < deadline, "never held after " + accepted + " messages");
        long id = sender.trySend("beta", "slow", payload);
        if (id != Client.WOULD_BLOCK) {
          accepted++;
        } else {
          sel.select(100);
          sel.selectedKeys().clear();
        }
        sender.processIo();
      }
      assertTrue(accepted > 0);
      assertEquals(Client.WOULD_BLOCK, sender.trySend("beta", "slow", payload));

      // The other service of the same node flows meanwhile.
      for (int i = 0; i < 50; i++) {
        assertNotEquals(Client.WOULD_BLOCK, sender.trySend("beta", "fast", payload));
        sender.flush(WAIT);
        assertNotNull(fast.receive(WAIT), "fast message " + i + " did not arrive");
      }
      int fastOk = 0;
      while (fastOk < 50) {
        Completion c = sender.waitCompletion(WAIT);
        assertNotNull(c, "fast completions stopped at " + fastOk);
        assertTrue(c.ok(), c.toString());
        fastOk++;
      }
      assertTrue(sender.isHeld("beta", "slow"), "resumed while nobody read");
      assertEquals(Client.WOULD_BLOCK, sender.trySend("beta", "slow", payload));

      // send() waits for the RESUME, which comes once the slow listener reads.
      CompletableFuture<Long> blocked = CompletableFuture.supplyAsync(() -> {
        try {
          return sender.send("beta", "slow", payload);
        } catch (RdmamsgException e) {
          throw new RuntimeException(e);
        }
      });
      assertFalse(blocked.isDone());
      for (int i = 0; i < accepted; i++) {
        assertNotNull(slow.receive(WAIT), "slow message " + i + " of " + accepted);
      }
      assertTrue(blocked.get(WAIT.toSeconds(), TimeUnit.SECONDS) > 0);
      sender.flush(WAIT);
      assertNotNull(slow.receive(WAIT), "the message send() waited with did not arrive");
      int slowOk = 0;
      while (slowOk < accepted + 1) {
        Completion c = sender.waitCompletion(WAIT);
        assertNotNull(c, "slow completions stopped at " + slowOk);
        assertTrue(c.ok(), c.toString());
        slowOk++;
      }
      assertEquals(0, sender.inFlight());
      assertFalse(sender.isHeld("beta", "slow"));
    }
  }
}
