package io.github.fencerlock.fencer;

/**
 * ReleasedException is the cause a released lease (or a closed session)
 * ends with: see {@link Lease#done()}.
 */
public class ReleasedException extends FencerException {
  private static final long serialVersionUID = 1L;

  /**
   * Makes the exception.
   *
   * @param message what happened
   * @param code the server's error code that caused it, or null
   * @param cause the underlying failure, or null
   */
  public ReleasedException(String message, String code, Throwable cause) {
    super(message, code, cause);
  }

  /**
   * Makes the exception without a code or cause.
   *
   * @param message what happened
   */
  public ReleasedException(String message) {
    super(message, null, null);
  }
}
