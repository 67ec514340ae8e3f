package io.github.fencerlock.fencer;

/**
 * AuthException: the server refused the credentials ({@code WRONGPASS}) or
 * requires some ({@code NOAUTH}). Not retried on other nodes: the nodes of a
 * cluster share their users.
 */
public class AuthException extends FencerException {
  private static final long serialVersionUID = 1L;

  /**
   * Makes the exception.
   *
   * @param message what happened
   * @param code the server's error code that caused it, or null
   * @param cause the underlying failure, or null
   */
  public AuthException(String message, String code, Throwable cause) {
    super(message, code, cause);
  }

  /**
   * Makes the exception without a code or cause.
   *
   * @param message what happened
   */
  public AuthException(String message) {
    super(message, null, null);
  }
}
