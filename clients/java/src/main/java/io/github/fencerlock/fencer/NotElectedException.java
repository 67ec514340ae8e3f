package io.github.fencerlock.fencer;

/**
 * NotElectedException: an {@link Election} call that needs leadership
 * ({@link Election#proclaim}) was made by a campaigner that does not lead.
 */
public class NotElectedException extends FencerException {
  private static final long serialVersionUID = 1L;

  /**
   * Makes the exception.
   *
   * @param message what happened
   */
  public NotElectedException(String message) {
    super(message, null, null);
  }
}
