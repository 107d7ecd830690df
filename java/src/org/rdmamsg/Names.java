package org.rdmamsg;

/**
 * The rule for node and service names (1-63 characters of A-Z a-z 0-9 . _ -),
 * checked before anything is queued, and the last destination that passed:
 * a stream names the same destination every time, so it is checked once.
 * Not thread-safe; the client guards it.
 */
final class Names {
  // The last valid names. They start empty, which is not a valid name: checked too.
  private String checkedNode = "";
  private String checkedService = "";

  /** Checks a destination's names, unless they are the last ones that passed. */
  void checkDestination(String node, String service) throws RdmamsgException {
    if (!node.equals(checkedNode) || node.isEmpty()) {
      check("node", node);
      checkedNode = node;
    }
    if (!service.equals(checkedService) || service.isEmpty()) {
      check("service", service);
      checkedService = service;
    }
  }

  /** @throws RdmamsgException {@code bad_request} naming the {@code kind} of name and the rule */
  static void check(String kind, String name) throws RdmamsgException {
    if (!Frames.isValidName(name)) {
      throw new RdmamsgException(Errc.BAD_REQUEST, "invalid " + kind + " name '" + name
          + "' (1-63 characters of A-Z a-z 0-9 . _ -)");
    }
  }
}
