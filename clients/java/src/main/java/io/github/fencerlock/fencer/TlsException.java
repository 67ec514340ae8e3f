package io.github.fencerlock.fencer;

/**
 * TlsException: a TLS connection failed for a reason a retry does not cure (a
 * certificate that did not verify, on either side, or a node without TLS).
 */
public class TlsException extends FencerException {
  private static final long serialVersionUID = 1L;

  /**
   * Makes the exception.
   *
   * @param message what happened
   * @param code the server's error code that caused it, or null
   * @param cause the underlying failure, or null
   */
  public TlsException(String message, String code, Throwable cause) {
    super(message, code, cause);
  }

  /**
   * Makes the exception without a code or cause.
   *
   * @param message what happened
   */
  public TlsException(String message) {
    super(message, null, null);
  }
}
