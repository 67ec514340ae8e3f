package io.github.fencerlock.fencer;

/**
 * LeaseLostException: a lease ended without being released. The server said
 * its owner no longer holds the lock ({@code FENCE.EXTEND} answered 0, or the
 * wire code {@code LEASELOST}), or the client-side validity ran out before a
 * renewal succeeded. Work done under the lease after that is unprotected; the
 * fencing token is what keeps it out of storage.
 */
public class LeaseLostException extends FencerException {
  private static final long serialVersionUID = 1L;

  /**
   * Makes the exception.
   *
   * @param message what happened
   * @param code the server's error code that caused it, or null
   * @param cause the underlying failure, or null
   */
  public LeaseLostException(String message, String code, Throwable cause) {
    super(message, code, cause);
  }

  /**
   * Makes the exception without a code or cause.
   *
   * @param message what happened
   */
  public LeaseLostException(String message) {
    super(message, null, null);
  }
}
