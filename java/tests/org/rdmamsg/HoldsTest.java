package org.rdmamsg;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** Backpressure per destination: a HOLD holds one node/service until its RESUME. */
class HoldsTest {
  @Test
  void aHoldHoldsOnlyItsDestinationUntilItsResume() {
    Holds h = new Holds();
    assertFalse(h.isHeld("beta", "slow"));
    h.hold("beta", "slow");
    assertTrue(h.isHeld("beta", "slow"));
    assertFalse(h.isHeld("beta", "fast"));
    assertFalse(h.isHeld("gamma", "slow"));
    h.hold("gamma", "slow");
    h.resume("beta", "slow");
    assertFalse(h.isHeld("beta", "slow"));
    assertTrue(h.isHeld("gamma", "slow"));
  }

  @Test
  void namesThatRunTogetherAreDifferentDestinations() {
    Holds h = new Holds();
    h.hold("a.b", "c");
    assertFalse(h.isHeld("a", "b.c"));
    assertFalse(h.isHeld("a.b.c", ""));
  }

  @Test
  void aResumeOfADestinationNotHeldChangesNothing() {
    Holds h = new Holds();
    h.hold("beta", "slow");
    h.resume("beta", "other");
    assertTrue(h.isHeld("beta", "slow"));
  }
}
