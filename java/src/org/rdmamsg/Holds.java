package org.rdmamsg;

import java.util.HashSet;

/**
 * Backpressure per destination: the destinations ({@code node/service}) the
 * daemon holds, from its HOLD until its RESUME. A send to a held destination
 * waits (or {@code trySend} returns {@code WOULD_BLOCK}); the others go on.
 * Not thread-safe; the client guards it.
 */
final class Holds {
  // Names never contain '/', so "node/service" names one destination.
  private final HashSet<String> held = new HashSet<>();

  void hold(String node, String service) {
    held.add(node + "/" + service);
  }

  void resume(String node, String service) {
    held.remove(node + "/" + service);
  }

  /** Whether the daemon holds {@code node/service}; costs nothing while nothing is held. */
  boolean isHeld(String node, String service) {
    return !held.isEmpty() && held.contains(node + "/" + service);
  }
}
