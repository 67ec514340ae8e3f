package io.github.fencerlock.fencer;

/**
 * ServerException: an error reply with a code the client has no class for.
 */
public class ServerException extends FencerException {
  private static final long serialVersionUID = 1L;

  /**
   * Makes the exception.
   *
   * @param message what happened
   * @param code the server's error code that caused it, or null
   * @param cause the underlying failure, or null
   */
  public ServerException(String message, String code, Throwable cause) {
    super(message, code, cause);
  }

  /**
   * Makes the exception without a code or cause.
   *
   * @param message what happened
   */
  public ServerException(String message) {
    super(message, null, null);
  }
}
