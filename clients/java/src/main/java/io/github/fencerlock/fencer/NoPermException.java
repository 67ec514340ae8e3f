package io.github.fencerlock.fencer;

/**
 * NoPermException: the user may not touch that lock or run that command
 * ({@code NOPERM}). Nothing was done.
 */
public class NoPermException extends FencerException {
  private static final long serialVersionUID = 1L;

  /**
   * Makes the exception.
   *
   * @param message what happened
   * @param code the server's error code that caused it, or null
   * @param cause the underlying failure, or null
   */
  public NoPermException(String message, String code, Throwable cause) {
    super(message, code, cause);
  }

  /**
   * Makes the exception without a code or cause.
   *
   * @param message what happened
   */
  public NoPermException(String message) {
    super(message, null, null);
  }
}
