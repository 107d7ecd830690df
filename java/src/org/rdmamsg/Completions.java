package org.rdmamsg;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;

/**
 * The messages this client sent and where their completions go. Ids are
 * 1, 2, 3, ..., shared by sends, publishes, requests and replies; the daemon
 * answers each with one completion (an ACK range, an ERROR, a PUB_ACK) —
 * except a request answered by its reply, which is settled without one
 * ({@link #settle}). A completion goes to the message's future if it has one
 * ({@code sendAsync}), else to the listener if one is set, else to the queue
 * that {@code pollCompletion} reads.
 *
 * <p>Futures and the listener are not called here: their completions are
 * collected as hand-outs, which the client takes under its lock
 * ({@link #takeHandouts()}) and hands out after releasing it
 * ({@link Handouts#handOut}). When the connection is lost, the futures still
 * waiting are handed the error that closed it. Not thread-safe; the client
 * guards it.
 */
final class Completions {
  private long nextId = 1;
  private long inFlight;
  private final CompletionQueue queue = new CompletionQueue();
  private final HashMap<Long, CompletableFuture<Completion>> futures = new HashMap<>();
  private Consumer<Completion> listener;
  // Completions for futures and the listener, to be handed out without the lock;
  // a null completion fails its future with the connection's error.
  private ArrayList<CompletableFuture<Completion>> handoutFutures = new ArrayList<>();
  private ArrayList<Completion> handoutCompletions = new ArrayList<>();

  /** A message about to be queued: its id; its completion goes to {@code future} if not null. */
  long issue(CompletableFuture<Completion> future) {
    final long id = nextId++;
    ++inFlight;
    if (future != null) futures.put(id, future);
    return id;
  }

  /** Messages issued whose completion has not come yet. */
  long inFlight() {
    return inFlight;
  }

  /** Completions without a future go to {@code listener}; null: to the queue. */
  void setListener(Consumer<Completion> listener) {
    this.listener = listener;
  }

  /** Whether the queue is empty. */
  boolean isEmpty() {
    return queue.isEmpty();
  }

  /** The oldest queued completion, or null. */
  Completion poll() {
    return queue.poll();
  }

  /** A completion from the daemon for ids {@code first .. first + count - 1}. */
  void complete(long first, long count, Errc errc, String text) {
    inFlight -= Math.min(inFlight, count);
    if (futures.isEmpty() && listener == null) {
      queue.add(first, count, errc, text);
      return;
    }
    if (listener == null && count > futures.size()) {
      // A long range and a few futures: find those, queue the rest as ranges.
      long next = first;
      for (long id : futuresIn(first, count)) {
        if (id > next) queue.add(next, id - next, errc, text);
        handOut(futures.remove(id), new Completion(id, errc, text));
        next = id + 1;
      }
      if (next - first < count) queue.add(next, count - (next - first), errc, text);
      return;
    }
    for (long i = 0; i < count; i++) {
      long id = first + i;
      CompletableFuture<Completion> f = futures.remove(id);
      if (f != null || listener != null) {
        handOut(f, new Completion(id, errc, text));
      } else {
        queue.add(id, 1, errc, text);
      }
    }
  }

  /** A PUB_ACK: the outcome of publish (or request) {@code c.msgId()}, with its counts. */
  void completePublish(Completion c) {
    inFlight -= Math.min(inFlight, 1);
    CompletableFuture<Completion> f = futures.remove(c.msgId());
    if (f != null || listener != null) {
      handOut(f, c);
    } else {
      queue.add(c);
    }
  }

  /** Request {@code id} got its reply: it is no longer in flight, and no completion comes. */
  void settle(long id) {
    inFlight -= Math.min(inFlight, 1);
    futures.remove(id);
  }

  /** Nobody waits for {@code id}'s future any more: its completion goes where one without goes. */
  void forgetFuture(long id) {
    futures.remove(id);
  }

  /** The connection is lost: every future still waiting is failed with its error. */
  void failAll() {
    for (CompletableFuture<Completion> f : futures.values()) handOut(f, null);
    futures.clear();
  }

  /** Whether completions are waiting to be handed out. */
  boolean hasHandouts() {
    return !handoutCompletions.isEmpty();
  }

  /** The completions to hand out, and the listener to hand them to; null if there are none. */
  Handouts takeHandouts() {
    if (handoutCompletions.isEmpty()) return null;
    Handouts h = new Handouts(handoutFutures, handoutCompletions, listener);
    handoutFutures = new ArrayList<>();
    handoutCompletions = new ArrayList<>();
    return h;
  }

  private void handOut(CompletableFuture<Completion> future, Completion c) {
    handoutFutures.add(future);
    handoutCompletions.add(c);
  }

  /** The ids of futures in {@code first .. first + count - 1}, in order. */
  private long[] futuresIn(long first, long count) {
    return futures.keySet().stream().mapToLong(Long::longValue)
        .filter(id -> id - first >= 0 && id - first < count).sorted().toArray();
  }

  /** Completions taken out under the lock, to be handed out without it. */
  static final class Handouts {
    private final ArrayList<CompletableFuture<Completion>> futures;
    private final ArrayList<Completion> completions;
    private final Consumer<Completion> listener;

    private Handouts(ArrayList<CompletableFuture<Completion>> futures,
        ArrayList<Completion> completions, Consumer<Completion> listener) {
      this.futures = futures;
      this.completions = completions;
      this.listener = listener;
    }

    /**
     * Completes each future (a failure with {@code why}) or calls the
     * listener, in order; the first exception a listener or future threw is
     * rethrown once all are handed out.
     */
    void handOut(RdmamsgException why) {
      RuntimeException thrown = null;
      for (int i = 0; i < completions.size(); i++) {
        CompletableFuture<Completion> f = futures.get(i);
        Completion c = completions.get(i);
        try {
          if (f == null) {
            if (listener != null) listener.accept(c);
          } else if (c == null) {
            f.completeExceptionally(why);
          } else {
            f.complete(c);
          }
        } catch (RuntimeException e) {
          if (thrown == null) thrown = e;
        }
      }
      if (thrown != null) throw thrown;
    }
  }
}
