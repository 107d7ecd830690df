package org.rdmamsg;

import java.util.ArrayList;

/**
 * Completions not taken yet, in arrival order. An ACK range is one entry
 * (a client numbering its messages 1, 2, 3, ... gets one range per ACK
 * frame), handed out one id at a time; a publish's outcome is an entry of
 * one id with its counts. Not thread-safe; the client guards it.
 */
final class CompletionQueue {
  private static final class Range {
    long first;
    long count; // ids first .. first + count - 1; 1 for an error
    final Errc errc;
    final String text;
    final int matched; // a publish's counts; 0 for other messages
    final int taken;
    final int dropped;

    Range(long first, long count, Errc errc, String text, int matched, int taken, int dropped) {
      this.first = first;
      this.count = count;
      this.errc = errc;
      this.text = text;
      this.matched = matched;
      this.taken = taken;
      this.dropped = dropped;
    }

    Completion completion(long id) {
      return new Completion(id, errc, text, matched, taken, dropped);
    }
  }

  private final ArrayList<Range> ranges = new ArrayList<>();
  private int head; // ranges before head are taken

  boolean isEmpty() {
    return head == ranges.size();
  }

  void add(long first, long count, Errc errc, String text) {
    add(new Range(first, count, errc, text, 0, 0, 0));
  }

  /** A publish's completion, with its counts. */
  void add(Completion c) {
    add(new Range(c.msgId(), 1, c.errc(), c.message(), c.matched(), c.taken(), c.dropped()));
  }

  private void add(Range r) {
    if (head > 0 && head == ranges.size()) {
      ranges.clear();
      head = 0;
    }
    ranges.add(r);
  }

  /** The oldest completion, or null. */
  Completion poll() {
    if (isEmpty()) return null;
    Range r = ranges.get(head);
    Completion c = r.completion(r.first);
    if (--r.count == 0) {
      ranges.set(head++, null);
    } else {
      r.first++;
    }
    return c;
  }

  /** The completion of {@code msgId}, taken out of its range; null if it has not come. */
  Completion take(long msgId) {
    for (int i = head; i < ranges.size(); i++) {
      Range r = ranges.get(i);
      if (Long.compareUnsigned(msgId - r.first, r.count) >= 0) continue;
      Completion c = r.completion(msgId);
      long last = r.first + r.count - 1;
      if (r.count == 1) {
        ranges.remove(i);
      } else if (msgId == r.first) {
        r.first++;
        r.count--;
      } else if (msgId == last) {
        r.count--;
      } else { // split the range around msgId
        r.count = msgId - r.first;
        ranges.add(i + 1, new Range(msgId + 1, last - msgId, r.errc, r.text, 0, 0, 0));
      }
      return c;
    }
    return null;
  }
}
