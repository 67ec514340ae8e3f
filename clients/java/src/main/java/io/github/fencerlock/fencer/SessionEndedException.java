package io.github.fencerlock.fencer;

/**
 * SessionEndedException: the server says the session is not open (it
 * expired, was closed or revoked, wire code {@code NOSESSION} or a keepalive
 * that answered 0): every lock held under it is gone.
 */
public class SessionEndedException extends LeaseLostException {
  private static final long serialVersionUID = 1L;

  /**
   * Makes the exception.
   *
   * @param message what happened
   * @param code the server's error code that caused it, or null
   * @param cause the underlying failure, or null
   */
  public SessionEndedException(String message, String code, Throwable cause) {
    super(message, code, cause);
  }

  /**
   * Makes the exception without a code or cause.
   *
   * @param message what happened
   */
  public SessionEndedException(String message) {
    super(message, null, null);
  }
}
