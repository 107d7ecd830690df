package org.rdmamsg;

import java.io.IOException;
import java.nio.channels.CancelledKeyException;
import java.nio.channels.ClosedSelectorException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.BooleanSupplier;

/**
 * The client's lock, who reads and writes the socket, and how blocking calls
 * wait; and the connection's one piece of state above its parts: the error
 * that closed it.
 *
 * <p>Every call of the client runs under one lock. A call that must wait
 * ({@link #await}) either becomes the I/O thread — at most one at a time
 * ({@code ioBusy}): it tells the daemon what was consumed, writes, and
 * selects on the socket <em>without</em> the lock, so that other threads
 * can queue sends meanwhile and wake it ({@link #wakeIo()}) when they have
 * something to write — or, while another thread is the I/O thread, waits on
 * {@code changed}, which the I/O thread signals after each turn. Either way
 * it checks its condition again after every turn, until it holds, the
 * deadline passes or the connection is lost.
 *
 * <p>Completions for futures and the listener are collected under the lock
 * and handed out without it: on {@link #unlock()} by the last level of the
 * lock, and by waiting threads between turns. A second lock
 * ({@code handoutLock}, taken before the client's) hands them out in order
 * and one batch at a time. A failure (a part's {@link RdmamsgException}, or
 * {@link #lose}) closes the socket, fails the futures still waiting and
 * wakes every waiter; from then on every call throws it.
 */
final class IoEngine {
  private final ReentrantLock lock = new ReentrantLock();
  private final Condition changed = lock.newCondition();
  private final ReentrantLock handoutLock = new ReentrantLock();
  private final SocketTransport transport;
  private final ReceiveQueue inbox;
  private final Completions completions;
  // Guarded by lock.
  private boolean ioBusy; // a thread is reading and writing (it may be in select, without the lock)
  private RdmamsgException failure; // null while connected

  IoEngine(SocketTransport transport, ReceiveQueue inbox, Completions completions) {
    this.transport = transport;
    this.inbox = inbox;
    this.completions = completions;
  }

  void lock() {
    lock.lock();
  }

  /** Releases the lock, then hands out the completions collected meanwhile. */
  void unlock() {
    if (!completions.hasHandouts() || lock.getHoldCount() > 1) {
      lock.unlock();
      return;
    }
    lock.unlock();
    handOut();
  }

  /** The error that closed the connection; null while it is open. */
  RdmamsgException failure() {
    return failure;
  }

  /** Throws the error that closed the connection, if it is closed. */
  void ensureOpen() throws RdmamsgException {
    if (failure != null) throw failure;
  }

  /**
   * Waits until {@code done} holds or {@code deadline} (a nanoTime;
   * {@link Deadline#FOREVER}) passes: false then. Called with the lock held
   * once.
   *
   * @throws RdmamsgException the error that closed the connection, or
   *     {@code timeout} when the thread is interrupted
   */
  boolean await(BooleanSupplier done, long deadline) throws RdmamsgException {
    for (;;) {
      if (done.getAsBoolean()) return true;
      if (failure != null) throw failure;
      if (completions.hasHandouts()) {
        lock.unlock();
        try {
          handOut();
        } finally {
          lock.lock();
        }
        continue;
      }
      final long left = Deadline.left(deadline);
      if (left <= 0) return false;
      if (Thread.currentThread().isInterrupted()) throw interrupted(null);
      if (ioBusy) {
        writeNow(); // what this thread queued (a request, CONSUMED) goes out now
        waitForTurn(left);
        continue;
      }
      ioBusy = true;
      try {
        pumpWaiting(done, left);
      } finally {
        ioBusy = false;
        changed.signalAll();
        if (failure != null) transport.closeSelector();
      }
    }
  }

  /** While another thread does the I/O: waits until it signals, or {@code nanos} pass. */
  private void waitForTurn(long nanos) throws RdmamsgException {
    try {
      if (nanos == Deadline.FOREVER) {
        changed.await();
      } else {
        changed.awaitNanos(nanos);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw interrupted(e);
    }
  }

  /**
   * As the I/O thread: says what was consumed, writes, and unless that was
   * what {@code done} waits for, waits for the socket and reads.
   */
  private void pumpWaiting(BooleanSupplier done, long nanos) {
    reportConsumed(); // before it waits for input
    writeSome();
    if (failure != null || done.getAsBoolean()) return;
    try {
      transport.watch();
      final long ms =
          nanos == Deadline.FOREVER ? 0 : Math.max(1, TimeUnit.NANOSECONDS.toMillis(nanos));
      lock.unlock();
      try {
        transport.select(ms);
      } finally {
        lock.lock();
      }
    } catch (IOException | ClosedSelectorException | CancelledKeyException e) {
      if (failure == null) lose(new RdmamsgException(Errc.IO_ERROR, "poll: " + e, e));
      return;
    }
    pumpNow();
  }

  /** Nonblocking: writes what the socket takes and reads what is there. */
  void pumpNow() {
    writeSome();
    readSome();
  }

  /** Writes what the socket takes now; wakes the thread in select for the rest. */
  void writeNow() {
    writeSome(); // the thread in select does not touch the socket until it has the lock
    wakeIo();
  }

  /** Tells the thread in select that there is something to write. */
  void wakeIo() {
    if (ioBusy && transport.unwritten() > 0) transport.wakeup();
  }

  /** Writes what the socket takes now (nothing once the connection is lost). */
  void writeSome() {
    if (failure != null) return;
    try {
      transport.write();
    } catch (RdmamsgException e) {
      lose(e);
    }
  }

  /** Reads and handles what is there (nothing once the connection is lost). */
  void readSome() {
    if (failure != null) return;
    try {
      transport.read();
    } catch (RdmamsgException e) {
      lose(e);
    }
  }

  /** Queues a CONSUMED with everything taken, if the daemon has not heard it yet. */
  void reportConsumed() {
    if (failure == null) inbox.reportConsumed(transport.out());
  }

  /** The connection ends with {@code why} (the first reason stays). */
  void lose(RdmamsgException why) {
    if (failure != null) return;
    failure = why;
    transport.close();
    completions.failAll();
    changed.signalAll();
    transport.wakeup();
    if (!ioBusy) transport.closeSelector();
  }

  /** Hands out collected completions; called without the lock. */
  private void handOut() {
    handoutLock.lock();
    try {
      Completions.Handouts h;
      RdmamsgException why;
      lock.lock();
      try {
        h = completions.takeHandouts();
        why = failure;
      } finally {
        lock.unlock();
      }
      if (h != null) h.handOut(why);
    } finally {
      handoutLock.unlock();
    }
  }

  /** For futures: drives the I/O until {@code done} or the deadline; false at the deadline. */
  boolean driveUntil(BooleanSupplier done, long deadline) {
    lock.lock();
    try {
      return await(done, deadline);
    } catch (RdmamsgException e) {
      return failure != null; // lost: the futures are failed with the reason; else interrupted
    } finally {
      unlock();
    }
  }

  /** Starts a daemon thread that does the I/O until the connection closes. */
  void startIoThread(String name) {
    Thread t = new Thread(() -> {
      lock.lock();
      try {
        await(() -> false, Deadline.FOREVER); // until the connection closes
      } catch (RdmamsgException e) {
        // closed: nothing more to read
      } finally {
        unlock();
      }
    }, name);
    t.setDaemon(true);
    t.start();
  }

  private static RdmamsgException interrupted(InterruptedException cause) {
    return new RdmamsgException(Errc.TIMEOUT, "interrupted while waiting for rdmamsgd", cause);
  }
}
