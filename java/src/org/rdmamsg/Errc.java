package org.rdmamsg;

/**
 * The outcome of an operation: the error codes of the local protocol
 * (docs/protocol.md, "Error codes"), with the same values and names as
 * {@code rdmamsg::Errc} in the C++ client.
 *
 * <p>{@link #toString()} gives the protocol's name ({@code "unknown_service"}),
 * which is what exception messages, logs and the command-line tool show.
 */
public enum Errc {
  /** Success: an acknowledged message, a completed request. */
  OK(0, "ok"),
  /** The destination node is not configured. */
  UNKNOWN_NODE(1, "unknown_node"),
  /** No listener for the service on the destination node (or it went away before taking the message). */
  UNKNOWN_SERVICE(2, "unknown_service"),
  /** The peer daemon is down, or the connection to it was lost before delivery. */
  PEER_UNREACHABLE(3, "peer_unreachable"),
  /** The payload is larger than the daemon's maximum message size. */
  TOO_LARGE(4, "too_large"),
  /** Not confirmed in time, or no answer in time from the daemon. */
  TIMEOUT(5, "timeout"),
  /** Well-formed but not acceptable: an invalid name, a sender service not registered, ... */
  BAD_REQUEST(6, "bad_request"),
  /** The service is already registered on this node. */
  DUPLICATE_SERVICE(7, "duplicate_service"),
  /** The daemon's resources are exhausted; retry later. */
  BUSY(8, "busy"),
  /** The daemon is stopping. */
  SHUTTING_DOWN(9, "shutting_down"),
  /** A malformed frame, or a frame of another protocol version; the connection is closed. */
  PROTOCOL_ERROR(10, "protocol_error"),
  /** A socket error (reported by the client library, never on the wire). */
  IO_ERROR(11, "io_error"),
  /** The connection is closed (client library only). */
  NOT_CONNECTED(12, "not_connected"),
  /** {@code trySend}: the message was not queued (client library only). */
  WOULD_BLOCK(13, "would_block"),
  /** The daemon's {@code local_policy} does not allow the request. */
  PERMISSION_DENIED(14, "permission_denied"),
  /** A publish matched no subscription anywhere in the mesh. */
  NO_SUBSCRIBERS(15, "no_subscribers"),
  /** A request matched no subscription anywhere in the mesh (answered at once). */
  NO_RESPONDERS(16, "no_responders");

  private static final Errc[] BY_VALUE = values();

  private final int value;
  private final String protocolName;

  Errc(int value, String protocolName) {
    this.value = value;
    this.protocolName = protocolName;
  }

  /** The numeric code, as in an ERROR frame and in the C API. */
  public int value() {
    return value;
  }

  /** The code with this value, or {@code null} if there is none. */
  public static Errc fromValue(int value) {
    return value >= 0 && value < BY_VALUE.length ? BY_VALUE[value] : null;
  }

  /** The protocol's name of the code, such as {@code "unknown_service"}. */
  @Override
  public String toString() {
    return protocolName;
  }
}
