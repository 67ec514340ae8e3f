package io.github.fencerlock.fencer;

/**
 * FencerException is the base class of every exception the client throws.
 * The server's error replies are read by their code (the first word of the
 * reply, {@link #code()}), never by their English text
 * (docs/protocol.md, Errors); each code the client acts on has a subclass.
 * The exceptions are unchecked, as {@link java.util.concurrent.locks.Lock}'s
 * methods declare none.
 */
public class FencerException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  /** The server's error code, or null. */
  private final String code;

  /**
   * Makes the exception.
   *
   * @param message what happened
   * @param code the server's error code that caused it, or null
   * @param cause the underlying failure, or null
   */
  public FencerException(String message, String code, Throwable cause) {
    super(message, cause);
    this.code = code;
  }

  /**
   * The server's error code (the first word of its error reply) when a
   * reply caused this exception, such as {@code UNCERTAIN} or
   * {@code NOTLEADER}; null otherwise.
   *
   * @return the code, or null
   */
  public String code() {
    return code;
  }
}
