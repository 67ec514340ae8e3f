package io.github.fencerlock.fencer.jdbc;

import io.github.fencerlock.fencer.FencerException;

/**
 * TokenRangeException: a token at or above 2<sup>63</sup> does not fit a
 * BIGINT column. fencer's tokens are log positions and never get there.
 */
public class TokenRangeException extends FencerException {
  private static final long serialVersionUID = 1L;

  /**
   * Makes the exception.
   *
   * @param message what happened
   */
  public TokenRangeException(String message) {
    super(message, null, null);
  }
}
