package io.github.fencerlock.fencer;

import java.security.SecureRandom;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

/**
 * Lease is a granted lock: its fencing token, and a future that completes,
 * with the cause, when the lease ends.
 *
 * <p>Pass {@link #token()} to the storage the lock protects with every
 * write, and let the storage refuse a token lower than one it has seen (see
 * {@link io.github.fencerlock.fencer.jdbc.TokenTable}): a lease can end
 * without its holder noticing in time (a pause, a partition), and only the
 * token keeps such a holder's writes out.
 *
 * <p>The lease's validity is counted by the client from just before it sent
 * the request that granted or last extended it, the TTL less a drift
 * allowance, so the client's view ends before the server's. A lease is
 * {@link AutoCloseable}: closing it releases it.
 */
public final class Lease implements AutoCloseable {
  /** Added to every drift allowance, as redsync does. */
  private static final long DRIFT_FLOOR_NS = TimeUnit.MILLISECONDS.toNanos(2);
  /** The shortest attempt a renewal gets while the lease has that much validity left. */
  private static final long MIN_RENEW_ATTEMPT_MS = 200;
  private static final SecureRandom RANDOM = new SecureRandom();

  /** The kinds of lock a lease can hold. */
  enum Kind {
    PLAIN, READ, WRITE, PERMIT
  }

  /** Req is what an acquire asks for; its owner is fixed for every attempt. */
  static final class Req {
    final Kind kind;
    final String name;
    final String owner;
    final long ttlMs;
    final int permits;
    final Session session;
    final String value;

    Req(Kind kind, String name, LeaseOptions o, int permits) {
      if (name == null || name.isEmpty()) {
        throw new InvalidArgumentException("empty lock name", "key");
      }
      this.kind = kind;
      this.name = name;
      this.owner = o.owner != null ? o.owner : randomOwner();
      this.session = o.session;
      this.ttlMs = o.session != null ? o.session.ttlMs : millisOf(o.ttl);
      this.permits = permits;
      this.value = o.value;
    }

    private Req(Req q, Kind kind) {
      this.kind = kind;
      this.name = q.name;
      this.owner = q.owner;
      this.ttlMs = q.ttlMs;
      this.permits = q.permits;
      this.session = q.session;
      this.value = q.value;
    }

    static Req plain(String name, LeaseOptions o) {
      return new Req(Kind.PLAIN, name, o, 0);
    }

    Req as(Kind k) {
      return new Req(this, k);
    }

    /** acquireArgs is the acquire command, waiting waitMs if positive. */
    Object[] acquireArgs(long waitMs) {
      List<Object> a = new ArrayList<>();
      switch (kind) {
        case READ:
          a.add("FENCE.RLOCK");
          break;
        case WRITE:
          a.add("FENCE.WLOCK");
          break;
        case PERMIT:
          a.add("FENCE.SEMACQUIRE");
          break;
        default:
          a.add("FENCE.ACQUIRE");
      }
      a.add(name);
      a.add(owner);
      a.add(session != null ? "0" : FencerClient.millis(ttlMs));
      if (kind == Kind.PERMIT) {
        a.add(Integer.toString(permits));
      }
      if (waitMs > 0) {
        a.add("WAIT");
        a.add(FencerClient.millis(waitMs));
      }
      if (session != null) {
        a.add("SESSION");
        a.add(Long.toUnsignedString(session.id));
        if (value != null && kind == Kind.PLAIN) {
          a.add("VALUE");
          a.add(value);
        }
      }
      return a.toArray();
    }

    Object[] releaseArgs() {
      if (session != null) {
        return new Object[] {"FENCE.RELEASE", name, owner, "SESSION", Long.toUnsignedString(session.id)};
      }
      return new Object[] {"FENCE.RELEASE", name, owner};
    }

    String what() {
      switch (kind) {
        case READ:
          return "read lock \"" + name + "\"";
        case WRITE:
          return "write lock \"" + name + "\"";
        case PERMIT:
          return "a permit of \"" + name + "\"";
        default:
          return "\"" + name + "\"";
      }
    }

    /** The validity allowance of a lease of this request. */
    long driftNs(FencerClient c) {
      return (long) (TimeUnit.MILLISECONDS.toNanos(ttlMs) * c.cfg.drift) + DRIFT_FLOOR_NS;
    }
  }

  /** Grant is a parsed grant: its token, slot, TTL, and when its request was sent. */
  static final class Grant {
    final long token;
    final int slot;
    long sent;

    Grant(long token, int slot, long sent) {
      this.token = token;
      this.slot = slot;
      this.sent = sent;
    }
  }

  /**
   * parseGrant reads the reply to an acquire: {@code [token, ttl]}
   * ({@code [slot, token, ttl]} for a permit) or null.
   */
  static Grant parseGrant(Object v, Req q, long sent) {
    if (v == null) {
      return null;
    }
    int n = q.kind == Kind.PERMIT ? 3 : 2;
    if (!(v instanceof List) || ((List<?>) v).size() != n) {
      throw new UncertainException("unexpected reply to " + q.acquireArgs(0)[0] + ": " + v);
    }
    List<?> a = (List<?>) v;
    int slot = -1;
    int i = 0;
    if (q.kind == Kind.PERMIT) {
      slot = (int) FencerClient.num(a.get(i++));
    }
    long token = FencerClient.num(a.get(i++));
    long ttl = FencerClient.num(a.get(i));
    if (token == 0 || (q.session == null && ttl <= 0)) {
      throw new UncertainException("unexpected reply to " + q.acquireArgs(0)[0] + ": " + v);
    }
    return new Grant(token, slot, sent);
  }

  static String randomOwner() {
    byte[] b = new byte[16];
    RANDOM.nextBytes(b);
    return HexFormat.of().formatHex(b);
  }

  static long millisOf(Duration d) {
    if (d == null || d.isNegative() || d.isZero()) {
      throw new InvalidArgumentException("ttl " + d + " is too short", "ttl");
    }
    return d.toMillis();
  }

  static final long FOREVER = Long.MAX_VALUE;

  /** acquire is every acquire's path: try once, then wait in the queue. */
  static Lease acquire(FencerClient c, Req q, LeaseOptions opts, boolean wait, boolean interruptible)
      throws InterruptedException {
    long drift = q.driftNs(c);
    if (q.ttlMs < 1 || TimeUnit.MILLISECONDS.toNanos(q.ttlMs) <= drift) {
      throw new InvalidArgumentException("ttl " + q.ttlMs + "ms is too short", "ttl");
    }
    long waitMs = !wait ? 0 : opts.wait == null ? FOREVER : opts.wait.toMillis();
    if (waitMs < 0) {
      throw new InvalidArgumentException("wait " + opts.wait + " is negative", "wait");
    }
    long deadline = waitMs == FOREVER ? FOREVER : System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(waitMs);
    if (q.session != null) {
      q.session.checkValid();
    }
    Grant g;
    try {
      FencerClient.Result r = c.exchange(c.standard(() -> q.session == null ? null : q.session.cause()), q.acquireArgs(0));
      g = parseGrant(r.reply, q, r.sent);
    } catch (FencerException e) {
      if (!(e instanceof InvalidArgumentException || e instanceof ClosedException || e instanceof AuthException
          || e instanceof NoPermException || e instanceof TlsException || e instanceof WrongTypeException
          || e instanceof SessionEndedException)) {
        releaseLater(c, q);
      }
      throw e;
    }
    if (g == null && waitMs > 0) {
      g = Waiter.await(c, q, deadline, interruptible);
    }
    if (g == null) {
      throw new LockedException(q.what() + " is held by another owner");
    }
    long ttlNs = TimeUnit.MILLISECONDS.toNanos(q.ttlMs);
    if (q.session == null && g.sent + ttlNs - drift <= System.nanoTime()) {
      // The grant took longer than its validity to arrive: renew it, which
      // counts from now, or give it up.
      try {
        FencerClient.Result r = c.exchange(c.standard(), "FENCE.EXTEND", q.name, q.owner, FencerClient.millis(q.ttlMs));
        if (FencerClient.num(r.reply) != 1 || r.sent + ttlNs - drift <= System.nanoTime()) {
          throw new LeaseLostException("late");
        }
        g.sent = r.sent;
      } catch (FencerException e) {
        releaseLater(c, q);
        throw new LeaseLostException("acquire " + q.what() + ": the grant arrived after its validity ended", null, e);
      }
    }
    if (q.session != null) {
      FencerException cause = q.session.cause();
      if (cause != null) {
        releaseLater(c, q);
        throw cause;
      }
    }
    Lease l = new Lease(c, q, g, drift);
    if (q.session == null && opts.autoRenew) {
      l.scheduleRenewal();
    }
    return l;
  }

  /**
   * releaseLater releases q's lock in the background, for an acquire whose
   * outcome is unknown: the release is remembered by the server, so a late
   * grant cannot outlive the caller who gave up on it.
   */
  static void releaseLater(FencerClient c, Req q) {
    if (c.isClosed()) {
      return;
    }
    try {
      c.pool.execute(() -> {
        try {
          c.exchange(c.standard(), q.releaseArgs());
        } catch (RuntimeException e) {
          // the server frees it when its TTL passes
        }
      });
    } catch (RejectedExecutionException e) {
      // closed meanwhile
    }
  }

  private final FencerClient client;
  private volatile Req req;
  private final long token;
  private final int slot;
  private final long ttlNs;
  private final long driftNs;
  // sent and until are guarded by this.
  private long sent;
  private long until;
  private final CompletableFuture<FencerException> done = new CompletableFuture<>();
  private ScheduledFuture<?> expiry;
  private ScheduledFuture<?> renewal;
  private final Object releaseLock = new Object();
  private boolean released;

  private Lease(FencerClient c, Req q, Grant g, long driftNs) {
    this.client = c;
    this.req = q;
    this.token = g.token;
    this.slot = g.slot;
    this.ttlNs = TimeUnit.MILLISECONDS.toNanos(q.ttlMs);
    this.driftNs = driftNs;
    this.sent = g.sent;
    this.until = g.sent + ttlNs - driftNs;
    c.leases.add(this);
    if (q.session != null) {
      q.session.track(this);
    } else {
      scheduleExpiry();
    }
    if (c.isClosed()) {
      end(c.closedException());
    }
  }

  /**
   * The fencing token of the grant: larger than the token of every earlier
   * grant of the lock. It does not change when the lease is extended or
   * downgraded. An unsigned 64-bit number held in a long, never negative
   * (see {@link FencerClient}).
   *
   * @return the token
   */
  public long token() {
    return token;
  }

  /**
   * The lock's name.
   *
   * @return the name
   */
  public String name() {
    return req.name;
  }

  /**
   * The owner value the lease was granted to.
   *
   * @return the owner
   */
  public String owner() {
    return req.owner;
  }

  /**
   * A semaphore permit's slot, 0 to permits &minus; 1; fence per (resource,
   * slot) with it. It is &minus;1 if the lease is not a permit.
   *
   * @return the slot
   */
  public int slot() {
    return slot;
  }

  /**
   * The lease's time to live (a session's, for a lock held under one).
   *
   * @return the TTL
   */
  public Duration ttl() {
    return Duration.ofNanos(ttlNs);
  }

  /**
   * The validity left (zero once it has run out or the lease ended).
   *
   * @return the time left
   */
  public Duration remaining() {
    if (done.isDone()) {
      return Duration.ZERO;
    }
    long u = req.session != null ? req.session.untilNanos() : untilNanos();
    return Duration.ofNanos(Math.max(0, u - System.nanoTime()));
  }

  /**
   * The end of the lease's validity as the client counts it: the server
   * frees the lock no earlier.
   *
   * @return when the validity ends, on the wall clock
   */
  public Instant validUntil() {
    return Instant.now().plus(remaining());
  }

  /**
   * Whether the lease is still valid: not ended, and its validity not run out.
   *
   * @return true while valid
   */
  public boolean isValid() {
    return !done.isDone() && remaining().compareTo(Duration.ZERO) > 0;
  }

  /**
   * A future that completes when the lease ends, with why: a
   * {@link LeaseLostException} (the server said the owner no longer holds
   * the lock, or the validity ran out before a renewal succeeded), a
   * {@link ReleasedException}, or a {@link ClosedException}. Stop the work
   * the lease protects when it completes. Each call returns a new future
   * that completing does not affect the lease.
   *
   * @return the future
   */
  public CompletableFuture<FencerException> done() {
    return done.copy();
  }

  /**
   * Why the lease ended, or null while it has not.
   *
   * @return the cause, or null
   */
  public FencerException cause() {
    return done.getNow(null);
  }

  /** checkValid throws why the lease ended, if it has. */
  void checkValid() {
    FencerException c = cause();
    if (c != null) {
      throw c;
    }
  }

  Req req() {
    return req;
  }

  synchronized long untilNanos() {
    return until;
  }

  /** end ends the lease with cause, the first time. */
  void end(FencerException cause) {
    if (!done.complete(cause)) {
      return;
    }
    synchronized (this) {
      if (expiry != null) {
        expiry.cancel(false);
      }
      if (renewal != null) {
        renewal.cancel(false);
      }
    }
    client.leases.remove(this);
  }

  private synchronized void scheduleExpiry() {
    if (done.isDone()) {
      return;
    }
    try {
      expiry = client.timers.schedule(this::expire, until - System.nanoTime(), TimeUnit.NANOSECONDS);
    } catch (RejectedExecutionException e) {
      // closed
    }
  }

  private void expire() {
    long left;
    synchronized (this) {
      left = until - System.nanoTime();
    }
    if (left > 0) {
      scheduleExpiry(); // extended meanwhile
      return;
    }
    end(new LeaseLostException("lease on " + req.what() + ": its validity ran out (at " + Instant.now()
        + ") before a renewal succeeded"));
  }

  /**
   * valid records a successful extend sent at s. Every extend asks for the
   * same TTL, so the latest one sent ends the server's lease last, and the
   * validity only moves later.
   */
  private synchronized void valid(long s) {
    if (done.isDone() || s - sent <= 0) {
      return;
    }
    sent = s;
    until = s + ttlNs - driftNs;
  }

  /**
   * attemptTimeout bounds one renewal attempt: with other nodes to try, half
   * the validity left (at least MIN_RENEW_ATTEMPT_MS of it), so that a node
   * that hangs leaves time for the next; with one node, all of it.
   */
  private long attemptTimeout() {
    long left = TimeUnit.NANOSECONDS.toMillis(untilNanos() - System.nanoTime());
    long rt = client.cfg.requestTimeoutMs;
    if (client.nodes.size() == 1) {
      return Math.min(rt, left);
    }
    return Math.min(rt, Math.max(left / 2, Math.min(left, MIN_RENEW_ATTEMPT_MS)));
  }

  /**
   * extend renews the lease for its TTL from now, retrying transient
   * failures on the other addresses until its validity runs out. It throws a
   * {@link LeaseLostException}, and ends the lease, if the server says the
   * owner no longer holds the lock. A lease held under a session is renewed
   * by the session's keepalive: extend sends one.
   */
  public void extend() {
    checkValid();
    Req q = req;
    if (q.session != null) {
      q.session.keepAlive();
      checkValid();
      return;
    }
    FencerClient.Result r;
    try {
      r = client.exchange(new FencerClient.Policy(this::attemptTimeout, 0, this::cause),
          "FENCE.EXTEND", q.name, q.owner, FencerClient.millis(q.ttlMs));
    } catch (FencerException e) {
      checkValid();
      throw e;
    }
    if (FencerClient.num(r.reply) != 1) {
      end(new LeaseLostException("the server says owner " + q.owner + " no longer holds " + q.what(), "EXTEND 0", null));
      checkValid();
    }
    valid(r.sent);
  }

  synchronized void scheduleRenewal() {
    if (done.isDone()) {
      return;
    }
    long at = sent + ttlNs / 3;
    scheduleRenewalIn(at - System.nanoTime());
  }

  private synchronized void scheduleRenewalIn(long delayNs) {
    if (done.isDone()) {
      return;
    }
    try {
      renewal = client.timers.schedule(() -> {
        try {
          client.pool.execute(this::renewOnce);
        } catch (RejectedExecutionException e) {
          // closed
        }
      }, Math.max(0, delayNs), TimeUnit.NANOSECONDS);
    } catch (RejectedExecutionException e) {
      // closed
    }
  }

  private void renewOnce() {
    if (done.isDone()) {
      return;
    }
    try {
      extend();
      scheduleRenewal();
    } catch (RuntimeException e) {
      // No verdict, and the lease is still valid: the validity timer ends
      // it unless a later renewal succeeds.
      scheduleRenewalIn(TimeUnit.MILLISECONDS.toNanos(FencerClient.jitter(4 * FencerClient.MIN_BACKOFF_MS)));
    }
  }

  /**
   * release ends the lease: it completes {@link #done()} (cause
   * {@link ReleasedException}) first, so that work under the lease stops
   * before another owner can be granted the lock, stops renewals, and frees
   * the lock on the server, handing it to the first waiter. It retries
   * transient failures on the other addresses. It throws a
   * {@link LeaseLostException} if the server says the owner no longer held
   * it. Calling it again after it succeeded (or after that verdict) does
   * nothing.
   */
  public void release() {
    synchronized (releaseLock) {
      if (released) {
        return;
      }
      Req q = req;
      end(new ReleasedException("lease on " + q.what() + " released"));
      FencerClient.Result r = client.exchange(client.standard(), q.releaseArgs());
      released = true;
      if (FencerClient.num(r.reply) != 1) {
        // A holder of a read-write lock or a semaphore is not remembered as
        // released: after an attempt whose outcome was unknown, 0 may mean
        // that attempt released it.
        if (q.kind != Kind.PLAIN && r.uncertainBefore) {
          return;
        }
        throw new LeaseLostException("the server says owner " + q.owner + " no longer held " + q.what());
      }
    }
  }

  /** close is {@link #release()}, for try-with-resources. */
  @Override
  public void close() {
    release();
  }

  /**
   * downgrade turns the write lease of a {@link FencedReadWriteLock} into a
   * read lease with no gap between the two: the lease keeps its token, owner
   * and validity (renewed from now), and readers waiting behind it may join
   * it. It throws {@link InvalidArgumentException} for a lease that is not a
   * write lease (a read lease cannot be upgraded), and a
   * {@link LeaseLostException}, ending the lease, if the server says the
   * owner no longer holds the write lock.
   */
  public void downgrade() {
    synchronized (releaseLock) {
      Req q = req;
      if (q.kind != Kind.WRITE) {
        throw new InvalidArgumentException("downgrade " + q.what() + ": not the write side of a read-write lock", "kind");
      }
      checkValid();
      Req rq = q.as(Kind.READ);
      FencerClient.Policy p = q.session != null ? client.standard(this::cause)
          : new FencerClient.Policy(this::attemptTimeout, 0, this::cause);
      FencerClient.Result r;
      try {
        r = client.exchange(p, rq.acquireArgs(0));
      } catch (FencerException e) {
        checkValid();
        throw e;
      }
      Grant g = parseGrant(r.reply, rq, r.sent);
      if (g == null || g.token != token) {
        end(new LeaseLostException("downgrade: the server says owner " + q.owner + " no longer holds " + q.what()));
        checkValid();
      }
      req = rq;
      if (q.session == null) {
        valid(r.sent);
      }
    }
  }

  @Override
  public String toString() {
    return "Lease[" + req.what() + ", token " + Long.toUnsignedString(token) + ", owner " + req.owner + "]";
  }
}
