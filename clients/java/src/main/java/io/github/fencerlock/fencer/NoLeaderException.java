package io.github.fencerlock.fencer;

/**
 * NoLeaderException: no node could serve the request for the whole failover
 * timeout (every address unreachable, or no leader: wire codes
 * {@code NOLEADER}, {@code NOTLEADER}, {@code TIMEOUT}, {@code SHUTDOWN}), and
 * nothing it sent may have taken effect.
 */
public class NoLeaderException extends FencerException {
  private static final long serialVersionUID = 1L;

  /**
   * Makes the exception.
   *
   * @param message what happened
   * @param code the server's error code that caused it, or null
   * @param cause the underlying failure, or null
   */
  public NoLeaderException(String message, String code, Throwable cause) {
    super(message, code, cause);
  }

  /**
   * Makes the exception without a code or cause.
   *
   * @param message what happened
   */
  public NoLeaderException(String message) {
    super(message, null, null);
  }
}
