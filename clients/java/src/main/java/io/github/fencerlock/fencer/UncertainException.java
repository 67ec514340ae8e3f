package io.github.fencerlock.fencer;

/**
 * UncertainException: the outcome is unknown. The command may or may not have
 * taken effect: the server answered {@code UNCERTAIN}, or a connection dropped
 * or timed out after the command was sent, and no retry settled it in time.
 * It is never a "no": an acquire that ends this way is released in the
 * background with the same owner, so a late grant does not outlive it.
 */
public class UncertainException extends FencerException {
  private static final long serialVersionUID = 1L;

  /**
   * Makes the exception.
   *
   * @param message what happened
   * @param code the server's error code that caused it, or null
   * @param cause the underlying failure, or null
   */
  public UncertainException(String message, String code, Throwable cause) {
    super(message, code, cause);
  }

  /**
   * Makes the exception without a code or cause.
   *
   * @param message what happened
   */
  public UncertainException(String message) {
    super(message, null, null);
  }
}
