package io.github.fencerlock.fencer.jdbc;

import io.github.fencerlock.fencer.FencerException;

/**
 * StaleTokenException: the store holds a higher token for the resource
 * than the write carried, so the write was refused and nothing changed: the
 * writer's lease has passed to someone else. Roll back the transaction the
 * write was part of.
 */
public class StaleTokenException extends FencerException {
  private static final long serialVersionUID = 1L;

  /** The resource the write was refused for. */
  private final String resource;
  /** The token the write carried. */
  private final long token;
  /** The higher token the store holds. */
  private final long highest;

  /**
   * Makes the exception.
   *
   * @param resource the resource written
   * @param token the write's token
   * @param highest the token the store holds
   */
  public StaleTokenException(String resource, long token, long highest) {
    super("fence: stale token " + Long.toUnsignedString(token) + " for \"" + resource + "\": the store holds "
        + Long.toUnsignedString(highest), null, null);
    this.resource = resource;
    this.token = token;
    this.highest = highest;
  }

  /**
   * The resource the write was refused for.
   *
   * @return the resource
   */
  public String resource() {
    return resource;
  }

  /**
   * The token the write carried.
   *
   * @return the token
   */
  public long token() {
    return token;
  }

  /**
   * The higher token the store holds.
   *
   * @return the token
   */
  public long highest() {
    return highest;
  }
}
