package io.github.fencerlock.fencer;

/**
 * InvalidArgumentException: the request itself is wrong (an {@code ERR} reply,
 * or a check before sending); nothing was done. {@link #argument()} names the
 * argument when the server said {@code ERR invalid argument: <argument>:
 * <reason>} ({@code key}, {@code owner}, {@code ttl}, {@code wait},
 * {@code permits}, ...).
 */
public class InvalidArgumentException extends FencerException {
  private static final long serialVersionUID = 1L;

  /** The argument the server named, or null. */
  private final String argument;

  /**
   * Makes the exception.
   *
   * @param message what happened
   * @param code the server's error code, or null
   * @param argument the argument at fault, or null
   * @param cause the underlying failure, or null
   */
  public InvalidArgumentException(String message, String code, String argument, Throwable cause) {
    super(message, code, cause);
    this.argument = argument;
  }

  /**
   * Makes the exception for a check made before sending.
   *
   * @param message what happened
   * @param argument the argument at fault
   */
  public InvalidArgumentException(String message, String argument) {
    this(message, null, argument, null);
  }

  /**
   * The argument the server named, or null.
   *
   * @return the argument's name
   */
  public String argument() {
    return argument;
  }
}
