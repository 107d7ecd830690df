package org.rdmamsg;

import java.nio.charset.StandardCharsets;

/**
 * The rules for subjects and subscription patterns (docs/protocol.md,
 * "Subjects"; the daemon's common/subject.cc), checked before anything is
 * queued: tokens of printable ASCII other than the dot, separated by dots,
 * none empty; {@code *} (one token) and {@code >} (one or more, only last)
 * are wildcards, only as whole tokens and only in a pattern; at most
 * {@value #MAX_LENGTH} bytes and {@value #MAX_TOKENS} tokens.
 */
final class SubjectRules {
  static final int MAX_LENGTH = 255;
  static final int MAX_TOKENS = 32;

  private SubjectRules() {}

  /** Why {@code subject} is not a subject a publish may name; null if it is one. */
  static String whyNotSubject(String subject) {
    return why(subject, false);
  }

  /** Why {@code pattern} is not a pattern a subscription may name; null if it is one. */
  static String whyNotPattern(String pattern) {
    return why(pattern, true);
  }

  /** @throws RdmamsgException {@code bad_request} naming the rule a published subject breaks */
  static void checkSubject(String subject) throws RdmamsgException {
    String why = whyNotSubject(subject);
    if (why != null) throw bad(why, subject);
  }

  /** @throws RdmamsgException {@code bad_request} naming the rule a pattern breaks */
  static void checkPattern(String pattern) throws RdmamsgException {
    String why = whyNotPattern(pattern);
    if (why != null) throw bad(why, pattern);
  }

  private static boolean isTokenChar(char c) {
    return c > ' ' && c < 0x7f && c != '.';
  }

  private static String why(String text, boolean wildcards) {
    if (text.isEmpty()) return "the subject is empty";
    if (utf8Length(text) > MAX_LENGTH) return "the subject is longer than 255 bytes";
    int tokens = 0;
    int start = 0;
    for (;;) {
      int dot = text.indexOf('.', start);
      int end = dot < 0 ? text.length() : dot;
      if (end == start) return "the subject has an empty token (two dots, or a dot at an end)";
      if (++tokens > MAX_TOKENS) return "the subject has more than 32 tokens";
      for (int i = start; i < end; i++) {
        if (!isTokenChar(text.charAt(i))) {
          return "the subject has a character that is not printable ASCII";
        }
      }
      boolean star = end - start == 1 && text.charAt(start) == '*';
      boolean rest = end - start == 1 && text.charAt(start) == '>';
      if (!wildcards && (star || rest)) {
        return "a published subject has no wildcard ('*' and '>' are for subscriptions)";
      }
      if (end - start > 1 && hasWildcard(text, start, end)) {
        return "'*' and '>' are wildcards only as whole tokens";
      }
      if (dot < 0) return null;
      if (rest) return "'>' is only the last token";
      start = dot + 1;
    }
  }

  private static boolean hasWildcard(String text, int start, int end) {
    for (int i = start; i < end; i++) {
      char c = text.charAt(i);
      if (c == '*' || c == '>') return true;
    }
    return false;
  }

  private static int utf8Length(String s) {
    for (int i = 0; i < s.length(); i++) {
      if (s.charAt(i) >= 0x80) return s.getBytes(StandardCharsets.UTF_8).length;
    }
    return s.length();
  }

  /** The daemon's form: the reason, then the subject (its first 64 characters). */
  private static RdmamsgException bad(String why, String text) {
    String shown = text.length() > 64 ? text.substring(0, 64) + "…" : text;
    return new RdmamsgException(Errc.BAD_REQUEST, why + ": '" + shown + "'");
  }
}
