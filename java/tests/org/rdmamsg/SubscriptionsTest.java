package org.rdmamsg;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** Subscription ids, the answers to SUBs, and which subscriptions hold. */
class SubscriptionsTest {
  @Test
  void idsCountFromOneAndOnlyAnAcceptedSubscriptionHolds() {
    Subscriptions s = new Subscriptions();
    assertEquals(1, s.issue());
    assertEquals(2, s.issue());
    assertTrue(s.answer(2, new RdmamsgException(Errc.BUSY, "full"))); // answers in any order
    assertTrue(s.answer(1, Boolean.TRUE));
    assertFalse(s.answer(1, Boolean.TRUE), "a second answer");
    assertFalse(s.answer(3, Boolean.TRUE), "an answer to no SUB");
    assertSame(Boolean.TRUE, s.take(1));
    assertEquals(Errc.BUSY, ((RdmamsgException) s.take(2)).errc());
    assertTrue(s.isActive(1));
    assertFalse(s.isActive(2));
    assertEquals(1, s.activeCount());
    assertTrue(s.remove(1));
    assertFalse(s.remove(1));
    assertFalse(s.remove(2));
  }

  @Test
  void theLateAnswerToAnAbandonedSubIsDroppedOnce() {
    Subscriptions s = new Subscriptions();
    long id = s.issue();
    s.abandon(id);
    assertTrue(s.answer(id, Boolean.TRUE)); // expected, and dropped
    assertFalse(s.isAnswered(id));
    assertFalse(s.isActive(id));
    assertFalse(s.answer(id, Boolean.TRUE), "a second late answer");
  }
}
