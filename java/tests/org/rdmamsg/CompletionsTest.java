package org.rdmamsg;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import org.junit.jupiter.api.Test;

/**
 * Where each completion goes — its future, else the listener, else the
 * queue — and that futures and the listener are only called when the client
 * hands the completions out.
 */
class CompletionsTest {
  private static List<Long> drain(Completions c) {
    List<Long> ids = new ArrayList<>();
    for (Completion x; (x = c.poll()) != null;) ids.add(x.msgId());
    return ids;
  }

  @Test
  void idsCountFromOneAndCompletionsWithoutAFutureAreQueued() {
    Completions c = new Completions();
    assertEquals(1, c.issue(null));
    assertEquals(2, c.issue(null));
    assertEquals(3, c.issue(null));
    assertEquals(3, c.inFlight());
    c.complete(1, 2, Errc.OK, "");
    c.complete(3, 1, Errc.UNKNOWN_SERVICE, "no inbox on beta");
    assertEquals(0, c.inFlight());
    assertFalse(c.hasHandouts());
    assertEquals(new Completion(1, Errc.OK, ""), c.poll());
    assertEquals(new Completion(2, Errc.OK, ""), c.poll());
    assertEquals(new Completion(3, Errc.UNKNOWN_SERVICE, "no inbox on beta"), c.poll());
    assertNull(c.poll());
  }

  @Test
  void moreCompletionsThanMessagesInFlightNeverCountBelowZero() {
    Completions c = new Completions();
    c.issue(null);
    c.complete(1, 5, Errc.OK, "");
    assertEquals(0, c.inFlight());
  }

  @Test
  void aFutureGetsItsOwnCompletionOutOfARangeAndTheRestIsQueued() throws Exception {
    Completions c = new Completions();
    CompletableFuture<Completion> f2 = new CompletableFuture<>();
    CompletableFuture<Completion> f5 = new CompletableFuture<>();
    c.issue(null);
    c.issue(f2);
    c.issue(null);
    c.issue(null);
    c.issue(f5);
    c.complete(1, 5, Errc.OK, "");
    assertEquals(List.of(1L, 3L, 4L), drain(c));
    assertFalse(f2.isDone(), "a future was completed before the hand-out");
    assertTrue(c.hasHandouts());
    c.takeHandouts().handOut(null);
    assertEquals(2, f2.get().msgId());
    assertEquals(5, f5.get().msgId());
    assertFalse(c.hasHandouts());
    assertNull(c.takeHandouts());
  }

  @Test
  void theListenerGetsEveryCompletionWithoutAFutureInOrder() {
    Completions c = new Completions();
    List<Completion> heard = new ArrayList<>();
    c.setListener(heard::add);
    CompletableFuture<Completion> f = new CompletableFuture<>();
    c.issue(null);
    c.issue(f);
    c.issue(null);
    c.complete(1, 2, Errc.OK, "");
    c.complete(3, 1, Errc.TIMEOUT, "late");
    assertTrue(c.isEmpty(), "a completion for the listener was queued");
    c.takeHandouts().handOut(null);
    assertEquals(List.of(new Completion(1, Errc.OK, ""), new Completion(3, Errc.TIMEOUT, "late")),
        heard);
    assertEquals(new Completion(2, Errc.OK, ""), f.join());
  }

  @Test
  void aLostConnectionFailsTheFuturesStillWaitingWithItsError() {
    Completions c = new Completions();
    CompletableFuture<Completion> done = new CompletableFuture<>();
    CompletableFuture<Completion> waiting = new CompletableFuture<>();
    c.issue(done);
    c.issue(waiting);
    c.issue(null);
    c.complete(1, 1, Errc.OK, "");
    c.failAll();
    RdmamsgException why = new RdmamsgException(Errc.NOT_CONNECTED, "rdmamsgd closed");
    c.takeHandouts().handOut(why);
    assertTrue(done.join().ok());
    ExecutionException e = assertThrows(ExecutionException.class, waiting::get);
    assertSame(why, e.getCause());
    c.failAll();
    assertFalse(c.hasHandouts(), "a future was failed twice");
  }

  @Test
  void aListenerThatThrowsDoesNotKeepTheOthersFromTheirCompletions() {
    Completions c = new Completions();
    List<Long> heard = new ArrayList<>();
    c.setListener(x -> {
      heard.add(x.msgId());
      if (x.msgId() == 1) throw new IllegalStateException("first");
      if (x.msgId() == 2) throw new IllegalArgumentException("second");
    });
    CompletableFuture<Completion> f = new CompletableFuture<>();
    c.issue(null);
    c.issue(null);
    c.issue(f);
    c.complete(1, 3, Errc.OK, "");
    Completions.Handouts h = c.takeHandouts();
    IllegalStateException e = assertThrows(IllegalStateException.class, () -> h.handOut(null));
    assertEquals("first", e.getMessage());
    assertEquals(List.of(1L, 2L), heard);
    assertTrue(f.isDone());
  }

  @Test
  void completionsQueuedBeforeAListenerIsSetStayQueued() {
    Completions c = new Completions();
    c.issue(null);
    c.complete(1, 1, Errc.OK, "");
    c.setListener(x -> {});
    assertEquals(List.of(1L), drain(c));
  }

  @Test
  void aPublishCompletesWithItsCountsAndARepliedRequestIsSettledWithout() throws Exception {
    Completions c = new Completions();
    CompletableFuture<Completion> f = new CompletableFuture<>();
    c.issue(null); // a publish
    c.issue(null); // a request, answered by its reply
    c.issue(f); // a request whose failure a requestAndWait waits for
    c.issue(null); // a send
    c.complete(4, 1, Errc.OK, "");
    c.completePublish(new Completion(1, Errc.OK, "", 2, 1, 1));
    c.settle(2);
    c.completePublish(new Completion(3, Errc.NO_RESPONDERS, "nobody", 0, 0, 0));
    assertEquals(0, c.inFlight());
    assertEquals(new Completion(4, Errc.OK, ""), c.poll());
    assertEquals(new Completion(1, Errc.OK, "", 2, 1, 1), c.poll());
    assertNull(c.poll());
    c.takeHandouts().handOut(null);
    assertEquals(Errc.NO_RESPONDERS, f.get().errc());
  }

  @Test
  void aForgottenFuturesCompletionIsQueued() {
    Completions c = new Completions();
    CompletableFuture<Completion> f = new CompletableFuture<>();
    long id = c.issue(f);
    c.forgetFuture(id);
    c.completePublish(new Completion(id, Errc.TIMEOUT, "late", 1, 0, 0));
    assertFalse(c.hasHandouts());
    assertEquals(new Completion(id, Errc.TIMEOUT, "late", 1, 0, 0), c.poll());
    assertFalse(f.isDone());
  }
}
