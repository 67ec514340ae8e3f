package io.github.fencerlock.fencer;

/**
 * WrongTypeException: the key is a lock of another kind ({@code WRONGTYPE}): a
 * plain lock asked for as a read-write lock or a semaphore, or the other way
 * round, or a Redis value. Nothing was done.
 */
public class WrongTypeException extends FencerException {
  private static final long serialVersionUID = 1L;

  /**
   * Makes the exception.
   *
   * @param message what happened
   * @param code the server's error code that caused it, or null
   * @param cause the underlying failure, or null
   */
  public WrongTypeException(String message, String code, Throwable cause) {
    super(message, code, cause);
  }

  /**
   * Makes the exception without a code or cause.
   *
   * @param message what happened
   */
  public WrongTypeException(String message) {
    super(message, null, null);
  }
}
