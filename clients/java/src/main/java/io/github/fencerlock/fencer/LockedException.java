package io.github.fencerlock.fencer;

/**
 * LockedException: another owner holds the lock (for a read-write lock, a
 * holder of the other side or a waiter ahead; for a semaphore, every
 * permit), or the wait ran out. Also thrown when the server remembers this
 * owner's own release of the lock: an owner value serves one lease only.
 */
public class LockedException extends FencerException {
  private static final long serialVersionUID = 1L;

  /**
   * Makes the exception.
   *
   * @param message what happened
   * @param code the server's error code that caused it, or null
   * @param cause the underlying failure, or null
   */
  public LockedException(String message, String code, Throwable cause) {
    super(message, code, cause);
  }

  /**
   * Makes the exception without a code or cause.
   *
   * @param message what happened
   */
  public LockedException(String message) {
    super(message, null, null);
  }
}
