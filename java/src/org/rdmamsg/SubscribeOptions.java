package org.rdmamsg;

import java.util.Objects;

/**
 * How {@link Client#subscribe(String, SubscribeOptions)} subscribes: a queue
 * group, the slow-consumer policy and the pending limit. Immutable; each
 * {@code with} method returns a copy:
 * {@code SubscribeOptions.defaults().withGroup("workers").withPolicy(SlowConsumer.BLOCK)}.
 */
public final class SubscribeOptions {
  private static final SubscribeOptions DEFAULTS = new SubscribeOptions("", SlowConsumer.DROP, 0);

  private final String group;
  private final SlowConsumer policy;
  private final int pendingLimit;

  private SubscribeOptions(String group, SlowConsumer policy, int pendingLimit) {
    this.group = group;
    this.policy = policy;
    this.pendingLimit = pendingLimit;
  }

  /** No queue group, {@link SlowConsumer#DROP}, the daemon's pending limit. */
  public SubscribeOptions() {
    this("", SlowConsumer.DROP, 0);
  }

  /** The defaults: no queue group, {@link SlowConsumer#DROP}, the daemon's pending limit. */
  public static SubscribeOptions defaults() {
    return DEFAULTS;
  }

  /**
   * A copy in queue group {@code group} (a name: 1-63 characters of A-Z a-z
   * 0-9 . _ -; empty for none): each message goes to one member of the group
   * across the mesh, a member on the publisher's node first.
   */
  public SubscribeOptions withGroup(String group) {
    return new SubscribeOptions(Objects.requireNonNull(group), policy, pendingLimit);
  }

  /** A copy with the slow-consumer policy {@code policy}. */
  public SubscribeOptions withPolicy(SlowConsumer policy) {
    return new SubscribeOptions(group, Objects.requireNonNull(policy), pendingLimit);
  }

  /**
   * A copy whose policy applies once {@code limit} messages are delivered
   * and not taken (unsigned; 0: the daemon's {@code pending_limit}, which is
   * also the most it allows).
   */
  public SubscribeOptions withPendingLimit(int limit) {
    return new SubscribeOptions(group, policy, limit);
  }

  /** The queue group; empty for none. */
  public String group() {
    return group;
  }

  /** The slow-consumer policy. */
  public SlowConsumer policy() {
    return policy;
  }

  /** The pending limit (unsigned); 0 for the daemon's. */
  public int pendingLimit() {
    return pendingLimit;
  }

  @Override
  public String toString() {
    return "group '" + group + "', " + policy + ", pending limit "
        + Integer.toUnsignedString(pendingLimit);
  }
}
