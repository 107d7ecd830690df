package org.rdmamsg;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** Names are checked before anything is queued, each bad one named in the error. */
class NamesTest {
  private static RdmamsgException refused(org.junit.jupiter.api.function.Executable e) {
    RdmamsgException x = assertThrows(RdmamsgException.class, e);
    assertEquals(Errc.BAD_REQUEST, x.errc());
    return x;
  }

  @Test
  void aBadNameIsABadRequestNamingItsKindAndTheName() {
    Names n = new Names();
    assertTrue(refused(() -> n.checkDestination("be ta", "inbox")).getMessage()
        .contains("invalid node name 'be ta'"));
    assertTrue(refused(() -> n.checkDestination("beta", "in/box")).getMessage()
        .contains("invalid service name 'in/box'"));
    assertTrue(refused(() -> Names.check("service", "x".repeat(64))).getMessage()
        .contains("1-63 characters"));
  }

  @Test
  void emptyNamesAreRefusedEvenAsTheFirstDestination() {
    Names n = new Names();
    refused(() -> n.checkDestination("", "inbox"));
    refused(() -> n.checkDestination("beta", ""));
  }

  @Test
  void aDestinationThatPassedStillRefusesAnotherBadOne() {
    Names n = new Names();
    assertDoesNotThrow(() -> n.checkDestination("beta", "inbox"));
    assertDoesNotThrow(() -> n.checkDestination("beta", "inbox"));
    refused(() -> n.checkDestination("beta", "in box"));
    refused(() -> n.checkDestination("beta", "in box")); // a bad name is never remembered
    refused(() -> n.checkDestination("", "inbox"));
    assertDoesNotThrow(() -> n.checkDestination("gamma", "inbox"));
  }
}
