package io.github.fencerlock.fencer;

/**
 * ValueReleasedException: a server run with {@code --redlock-multi-endpoint}
 * refused a write of the value whose release is the key's newest it remembers
 * (wire code {@code RELEASED}). Nothing was done: take the lock again with a
 * new value.
 */
public class ValueReleasedException extends FencerException {
  private static final long serialVersionUID = 1L;

  /**
   * Makes the exception.
   *
   * @param message what happened
   * @param code the server's error code that caused it, or null
   * @param cause the underlying failure, or null
   */
  public ValueReleasedException(String message, String code, Throwable cause) {
    super(message, code, cause);
  }

  /**
   * Makes the exception without a code or cause.
   *
   * @param message what happened
   */
  public ValueReleasedException(String message) {
    super(message, null, null);
  }
}
