package io.github.fencerlock.fencer;

import java.time.Duration;

/**
 * LeaseOptions configures an acquire: the lease's TTL, renewal, owner,
 * session, value, and how long to wait. Each setter returns this, so that
 * options read as one expression:
 *
 * <pre>{@code
 * new LeaseOptions().ttl(Duration.ofSeconds(10)).autoRenew(true)
 * }</pre>
 *
 * An acquire copies the options it is given; changing them afterwards does
 * not change a lease or a lock made with them.
 */
public final class LeaseOptions {
  /** The default TTL of a lease: 8s, redsync's default expiry. */
  public static final Duration DEFAULT_TTL = Duration.ofSeconds(8);

  Duration ttl = DEFAULT_TTL;
  boolean autoRenew;
  String owner;
  Session session;
  String value;
  Duration wait;

  /** Makes the default options: an 8s TTL, no renewal, a random owner, no session, waiting until granted. */
  public LeaseOptions() {}

  LeaseOptions copy() {
    LeaseOptions o = new LeaseOptions();
    o.ttl = ttl;
    o.autoRenew = autoRenew;
    o.owner = owner;
    o.session = session;
    o.value = value;
    o.wait = wait;
    return o;
  }

  /**
   * ttl sets the lease's time to live: the server frees the lock when it
   * has not been extended for that long. The server accepts 100ms to 24h by
   * default. The default is 8s.
   *
   * @param ttl the time to live
   * @return these options
   */
  public LeaseOptions ttl(Duration ttl) {
    this.ttl = ttl;
    return this;
  }

  /**
   * autoRenew keeps the lease alive in the background, extending it about
   * every TTL/3, until it is released. Transient failures are retried on the
   * other addresses while the lease is still valid; the lease ends only when
   * the server says it is gone or its validity runs out. The default is no
   * renewal.
   *
   * @param on whether to renew
   * @return these options
   */
  public LeaseOptions autoRenew(boolean on) {
    this.autoRenew = on;
    return this;
  }

  /**
   * owner sets the owner value sent to the server instead of a random one.
   * It must be unique per lease: the server refuses an acquire by an owner
   * whose release of the same lock it remembers, and treats two holders
   * with the same owner as one. The default is 16 random bytes in hex.
   *
   * @param owner the owner value
   * @return these options
   */
  public LeaseOptions owner(String owner) {
    this.owner = owner;
    return this;
  }

  /**
   * session acquires the lock under session s: it has no TTL of its own and
   * lives as long as the session, which one keepalive renews for all its
   * locks. The lease ends when the session does; ttl and autoRenew do not
   * apply. The default is no session.
   *
   * @param s the session
   * @return these options
   */
  public LeaseOptions session(Session s) {
    this.session = s;
    return this;
  }

  /**
   * value gives a lock held under a session a value that
   * {@code FENCE.HOLDER} and watchers see (an election's leader's value).
   * The default is none.
   *
   * @param value the value
   * @return these options
   */
  public LeaseOptions value(String value) {
    this.value = value;
    return this;
  }

  /**
   * wait bounds how long an acquire waits in the server's queue before it
   * throws {@link LockedException}; zero means do not wait. The default is
   * to wait until granted (or the thread is interrupted).
   *
   * @param wait the longest wait
   * @return these options
   */
  public LeaseOptions wait(Duration wait) {
    this.wait = wait;
    return this;
  }
}
