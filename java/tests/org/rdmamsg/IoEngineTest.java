package org.rdmamsg;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Blocking waits: one thread reads for all, a lost connection wakes every
 * waiter with its reason, futures drive the I/O themselves, and completions
 * reach listeners outside the lock.
 */
@Timeout(60)
class IoEngineTest {
  private static final long SECONDS = FakeDaemon.WAIT.toSeconds();
  private ClientParts parts;
  private IoEngine engine;
  private FakeDaemon daemon;

  @BeforeEach
  void connect() throws Exception {
    parts = new ClientParts();
    engine = parts.engine;
    daemon = parts.daemon;
  }

  @AfterEach
  void close() throws Exception {
    parts.close();
  }

  /** Waits (in the calling thread) as a client's blocking call does. */
  private boolean await(BooleanSupplier done, Duration timeout) throws RdmamsgException {
    engine.lock();
    try {
      return engine.await(done, Deadline.after(timeout));
    } finally {
      engine.unlock();
    }
  }

  /** The same in another thread. */
  private CompletableFuture<Boolean> awaitAsync(BooleanSupplier done, Duration timeout) {
    return CompletableFuture.supplyAsync(() -> {
      try {
        return await(done, timeout);
      } catch (RdmamsgException e) {
        throw new RuntimeException(e);
      }
    });
  }

  @Test
  void aWaitEndsAtItsDeadlineOrOnceWhatItWaitsForWasRead() throws Exception {
    assertFalse(await(() -> !parts.inbox.isEmpty(), Duration.ofMillis(50)));
    daemon.deliver("alpha", "", "inbox", "hi");
    assertTrue(await(() -> !parts.inbox.isEmpty(), FakeDaemon.WAIT));
  }

  @Test
  void whatOneThreadReadsEndsTheWaitsOfTheOthers() throws Exception {
    List<CompletableFuture<Boolean>> waiters = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      waiters.add(awaitAsync(() -> !parts.inbox.isEmpty(), FakeDaemon.WAIT));
    }
    daemon.deliver("alpha", "", "inbox", "hi");
    for (CompletableFuture<Boolean> w : waiters) assertTrue(w.get(SECONDS, TimeUnit.SECONDS));
    assertEquals(1, parts.inbox.size());
  }

  @Test
  void aLostConnectionEndsEveryWaitWithItsReason() throws Exception {
    List<CompletableFuture<Boolean>> waiters = new ArrayList<>();
    for (int i = 0; i < 3; i++) waiters.add(awaitAsync(() -> false, Duration.ofDays(1)));
    RdmamsgException why = new RdmamsgException(Errc.IO_ERROR, "gone");
    parts.lose(why);
    for (CompletableFuture<Boolean> w : waiters) {
      ExecutionException e = assertThrows(ExecutionException.class,
          () -> w.get(SECONDS, TimeUnit.SECONDS));
      assertSame(why, e.getCause().getCause());
    }
    RdmamsgException later = assertThrows(RdmamsgException.class,
        () -> await(() -> false, FakeDaemon.WAIT));
    assertSame(why, later);
    parts.lose(new RdmamsgException(Errc.NOT_CONNECTED, "second"));
    assertSame(why, engine.failure(), "the first reason stays");
  }

  @Test
  void anInterruptedWaitIsATimeout() {
    Thread.currentThread().interrupt();
    try {
      RdmamsgException e =
          assertThrows(RdmamsgException.class, () -> await(() -> false, Duration.ofDays(1)));
      assertEquals(Errc.TIMEOUT, e.errc());
      assertTrue(e.getMessage().contains("interrupted"), e.getMessage());
    } finally {
      Thread.interrupted();
    }
    assertSame(null, engine.failure(), "an interrupt closed the connection");
  }

  @Test
  void aFutureDrivesTheIoWhenWaitedOnAndFailsWithTheReasonWhenLost() throws Exception {
    DrivenFuture<Completion> first = new DrivenFuture<>(engine);
    DrivenFuture<Completion> second = new DrivenFuture<>(engine);
    engine.lock();
    try {
      parts.completions.issue(first);
      parts.completions.issue(second);
    } finally {
      engine.unlock();
    }
    daemon.ack(1, 1);
    assertTrue(first.get(SECONDS, TimeUnit.SECONDS).ok()); // no other thread reads
    daemon.drop();
    ExecutionException e =
        assertThrows(ExecutionException.class, () -> second.get(SECONDS, TimeUnit.SECONDS));
    assertEquals(Errc.NOT_CONNECTED, ((RdmamsgException) e.getCause()).errc());
  }

  /** A listener taking the client's lock from another thread: it would hang if called with it. */
  private void lockFromAnotherThread(Completion c, List<Completion> heard) {
    try {
      CompletableFuture.runAsync(() -> {
        engine.lock();
        engine.unlock();
      }).get(SECONDS, TimeUnit.SECONDS);
      heard.add(c);
    } catch (Exception e) {
      throw new RuntimeException(e);
    }
  }

  @Test
  void completionsReachTheListenerOutsideTheLock() throws Exception {
    List<Completion> heard = new ArrayList<>();
    engine.lock();
    try {
      parts.completions.setListener(c -> lockFromAnotherThread(c, heard));
      parts.completions.issue(null);
      parts.completions.issue(null);
    } finally {
      engine.unlock();
    }
    daemon.ack(1, 1);
    assertTrue(await(() -> heard.size() == 1, FakeDaemon.WAIT)); // handed out between turns
    daemon.ack(2, 1);
    engine.lock();
    try {
      assertTrue(Wait.until(() -> {
        engine.readSome();
        return parts.completions.hasHandouts();
      }));
      assertEquals(1, heard.size(), "handed out under the lock");
    } finally {
      engine.unlock(); // handed out here
    }
    assertEquals(2, heard.size());
    assertEquals(2, heard.get(1).msgId());
  }
}
