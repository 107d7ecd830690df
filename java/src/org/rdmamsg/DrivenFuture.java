package org.rdmamsg;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * A future completed by a client's I/O that drives that I/O while it is
 * waited on: {@code get} and {@code join} read from the daemon (or wait for
 * the thread that does) until the future is done, so a client without an I/O
 * thread completes it all the same. Futures derived from it
 * ({@code thenApply}, ...) do the same.
 */
final class DrivenFuture<T> extends CompletableFuture<T> {
  private final IoEngine engine;

  DrivenFuture(IoEngine engine) {
    this.engine = engine;
  }

  @Override
  public <U> CompletableFuture<U> newIncompleteFuture() {
    return new DrivenFuture<>(engine);
  }

  @Override
  public T get() throws InterruptedException, ExecutionException {
    if (!isDone()) engine.driveUntil(this::isDone, Deadline.FOREVER);
    return super.get();
  }

  @Override
  public T get(long timeout, TimeUnit unit)
      throws InterruptedException, ExecutionException, TimeoutException {
    final long deadline = Deadline.after(Duration.ofNanos(unit.toNanos(timeout)));
    if (!isDone()) engine.driveUntil(this::isDone, deadline);
    // Driving may end before the future is completed: when the connection is
    // lost, another thread may still be handing the failure to the futures.
    // What is left of the timeout covers that hand-over.
    if (deadline == Deadline.FOREVER) return super.get();
    return super.get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
  }

  @Override
  public T join() {
    if (!isDone()) engine.driveUntil(this::isDone, Deadline.FOREVER);
    return super.join();
  }
}
