package org.rdmamsg;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** Subjects and patterns are checked as the daemon checks them (common/subject.cc). */
class SubjectRulesTest {
  @Test
  void aSubjectIsDotSeparatedTokensOfPrintableAsciiWithoutWildcards() {
    assertNull(SubjectRules.whyNotSubject("orders"));
    assertNull(SubjectRules.whyNotSubject("orders.x.eu"));
    assertNull(SubjectRules.whyNotSubject("a-b_c:d$e.9"));
    for (String bad : new String[] {"", "orders..eu", ".orders", "orders.", "orders.*",
             "orders.>", "orders eu", "orders\teu", "café", "orders.x*"}) {
      assertNotNull(SubjectRules.whyNotSubject(bad), "'" + bad + "' passed");
    }
    assertTrue(SubjectRules.whyNotSubject("orders.*").contains("no wildcard"));
  }

  @Test
  void aPatternHasWildcardsAsWholeTokensAndTheRestOnlyLast() {
    for (String ok : new String[] {"orders.*.eu", "orders.>", ">", "*", "*.*.>"}) {
      assertNull(SubjectRules.whyNotPattern(ok), ok);
    }
    for (String bad : new String[] {"orders.>.eu", "orders.x*", "orders.>x", "orders..*", ""}) {
      assertNotNull(SubjectRules.whyNotPattern(bad), "'" + bad + "' passed");
    }
    assertTrue(SubjectRules.whyNotPattern("orders.>.eu").contains("only the last token"));
  }

  @Test
  void limitsOnLengthAndTokensNameTheLimit() {
    String longest = "a".repeat(255);
    assertNull(SubjectRules.whyNotSubject(longest));
    assertTrue(SubjectRules.whyNotSubject(longest + "a").contains("255"));
    assertTrue(SubjectRules.whyNotSubject("é".repeat(128)).contains("255"),
        "the limit is in bytes");
    String tokens = "t" + ".t".repeat(31);
    assertNull(SubjectRules.whyNotSubject(tokens));
    assertTrue(SubjectRules.whyNotSubject(tokens + ".t").contains("32"));
  }

  @Test
  void aBadOneIsABadRequestNamingTheRuleAndTheSubject() {
    RdmamsgException e =
        assertThrows(RdmamsgException.class, () -> SubjectRules.checkSubject("orders..eu"));
    assertEquals(Errc.BAD_REQUEST, e.errc());
    assertEquals("the subject has an empty token (two dots, or a dot at an end): 'orders..eu'",
        e.detail());
    e = assertThrows(RdmamsgException.class, () -> SubjectRules.checkPattern("x".repeat(300)));
    assertTrue(e.detail().endsWith("x".repeat(64) + "…'"), e.detail());
  }
}
