package org.rdmamsg;

import java.io.IOException;

/**
 * A failed operation, with the reason as an {@link Errc} and the daemon's (or
 * the library's) explanation. The message reads {@code "unknown_service: no
 * listener for nobody on beta"}: the code's protocol name, then the detail.
 */
public class RdmamsgException extends IOException {
  private static final long serialVersionUID = 1L;

  private final Errc errc;
  private final String detail;

  /** A failure with code {@code errc} and the explanation {@code detail}. */
  public RdmamsgException(Errc errc, String detail) {
    this(errc, detail, null);
  }

  /** The same, with the exception that caused it. */
  public RdmamsgException(Errc errc, String detail, Throwable cause) {
    super(errc + ": " + detail, cause);
    this.errc = errc;
    this.detail = detail;
  }

  /** Why the operation failed. */
  public Errc errc() {
    return errc;
  }

  /** The explanation without the code's name. */
  public String detail() {
    return detail;
  }
}
