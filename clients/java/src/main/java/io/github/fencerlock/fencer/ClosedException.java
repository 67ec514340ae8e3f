package io.github.fencerlock.fencer;

/**
 * ClosedException: the {@link FencerClient} was closed (also the cause its
 * leases end with).
 */
public class ClosedException extends FencerException {
  private static final long serialVersionUID = 1L;

  /**
   * Makes the exception.
   *
   * @param message what happened
   * @param code the server's error code that caused it, or null
   * @param cause the underlying failure, or null
   */
  public ClosedException(String message, String code, Throwable cause) {
    super(message, code, cause);
  }

  /**
   * Makes the exception without a code or cause.
   *
   * @param message what happened
   */
  public ClosedException(String message) {
    super(message, null, null);
  }
}
