package io.github.fencerlock.fencer;

import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

/**
 * Session is a lease of its own on the server that locks can be held under
 * ({@link LeaseOptions#session}, {@link Election}): one keepalive, sent about
 * every TTL/3 in the background, renews it for all of them, and when it ends
 * (closed, expired, revoked) the server releases every lock held under it,
 * in one entry. Its {@link #done()} future completes when the session is
 * lost (the server says it ended, or its validity ran out before a keepalive
 * succeeded) or closed, and so do the leases held under it. Closing it
 * ({@link AutoCloseable}) releases its locks.
 */
public final class Session implements AutoCloseable {
  private static final long MIN_RENEW_ATTEMPT_MS = 200;

  final FencerClient client;
  final long id;
  final long ttlMs;
  private final long ttlNs;
  private final long driftNs;
  // sent, until, taken and the timers are guarded by this.
  private long sent;
  private long until;
  private long taken;
  private ScheduledFuture<?> expiry;
  private ScheduledFuture<?> renewal;
  private final CompletableFuture<FencerException> done = new CompletableFuture<>();
  private final Set<Lease> leases = ConcurrentHashMap.newKeySet();
  private final Object closeLock = new Object();
  private boolean closed;

  private Session(FencerClient c, long id, long ttlMs, long driftNs, long sent) {
    this.client = c;
    this.id = id;
    this.ttlMs = ttlMs;
    this.ttlNs = TimeUnit.MILLISECONDS.toNanos(ttlMs);
    this.driftNs = driftNs;
    this.sent = sent;
    this.until = sent + ttlNs - driftNs;
  }

  static Session open(FencerClient c, Duration ttl) {
    long ttlMs = Lease.millisOf(ttl);
    long drift = (long) (TimeUnit.MILLISECONDS.toNanos(ttlMs) * c.cfg.drift) + TimeUnit.MILLISECONDS.toNanos(2);
    if (TimeUnit.MILLISECONDS.toNanos(ttlMs) <= drift) {
      throw new InvalidArgumentException("session ttl " + ttl + " is too short", "ttl");
    }
    // An open whose outcome is unknown is retried, which can leave behind an
    // unused session; it holds no locks and ends after its TTL.
    FencerClient.Result r = c.exchange(c.standard(), "FENCE.SESSION", "OPEN", FencerClient.millis(ttlMs));
    long id = FencerClient.num(r.reply);
    if (id <= 0) {
      throw new UncertainException("unexpected reply to FENCE.SESSION OPEN: " + r.reply);
    }
    Session s = new Session(c, id, ttlMs, drift, r.sent);
    c.sessions.add(s);
    s.scheduleExpiry();
    s.scheduleRenewal();
    if (c.isClosed()) {
      s.end(c.closedException());
    }
    return s;
  }

  /**
   * The session's ID: the log position of the entry that opened it, never reused.
   *
   * @return the ID
   */
  public long id() {
    return id;
  }

  /**
   * The session's time to live.
   *
   * @return the TTL
   */
  public Duration ttl() {
    return Duration.ofMillis(ttlMs);
  }

  synchronized long untilNanos() {
    return until;
  }

  /**
   * The validity left as the client counts it (zero once ended).
   *
   * @return the time left
   */
  public Duration remaining() {
    if (done.isDone()) {
      return Duration.ZERO;
    }
    return Duration.ofNanos(Math.max(0, untilNanos() - System.nanoTime()));
  }

  /**
   * When the session's validity ends as the client counts it; the server
   * ends it no earlier.
   *
   * @return the end, on the wall clock
   */
  public Instant validUntil() {
    return Instant.now().plus(remaining());
  }

  /**
   * Whether the session is still valid.
   *
   * @return true while valid
   */
  public boolean isValid() {
    return !done.isDone() && !remaining().isZero();
  }

  /**
   * A future that completes when the session ends, with why: a
   * {@link LeaseLostException} ({@link SessionEndedException} if the server
   * said so), a {@link ReleasedException} after {@link #close()}, or a
   * {@link ClosedException}.
   *
   * @return the future
   */
  public CompletableFuture<FencerException> done() {
    return done.copy();
  }

  /**
   * Why the session ended, or null while it has not.
   *
   * @return the cause, or null
   */
  public FencerException cause() {
    return done.getNow(null);
  }

  void checkValid() {
    FencerException c = cause();
    if (c != null) {
      throw c;
    }
  }

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
    client.sessions.remove(this);
    for (Lease l : leases) {
      l.end(cause);
    }
  }

  void track(Lease l) {
    leases.add(l);
    l.done().whenComplete((c, e) -> leases.remove(l));
    FencerException c = cause();
    if (c != null) {
      l.end(c);
    }
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
      scheduleExpiry();
      return;
    }
    end(new LeaseLostException("session " + id + "'s validity ran out (at " + Instant.now()
        + ") before a keepalive succeeded"));
  }

  private synchronized void scheduleRenewal() {
    scheduleRenewalIn(sent + ttlNs / 3 - System.nanoTime());
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
      keepAlive();
      scheduleRenewal();
    } catch (RuntimeException e) {
      scheduleRenewalIn(TimeUnit.MILLISECONDS.toNanos(FencerClient.jitter(4 * FencerClient.MIN_BACKOFF_MS)));
    }
  }

  private long attemptTimeout() {
    long left = TimeUnit.NANOSECONDS.toMillis(untilNanos() - System.nanoTime());
    long rt = client.cfg.requestTimeoutMs;
    if (client.nodes.size() == 1) {
      return Math.min(rt, left);
    }
    return Math.min(rt, Math.max(left / 2, Math.min(left, MIN_RENEW_ATTEMPT_MS)));
  }

  /**
   * keepAlive renews the session for its TTL from now (the background
   * keepalive does this on its own), retrying transient failures until the
   * validity runs out. It throws {@link SessionEndedException}, and ends the
   * session, if the server says the session is not open. When the server
   * says locks were taken from the session by others (revoked, overwritten),
   * it ends the leases of those locks with a {@link LeaseLostException}.
   */
  public void keepAlive() {
    checkValid();
    FencerClient.Result r;
    try {
      r = client.exchange(new FencerClient.Policy(this::attemptTimeout, 0, this::cause),
          "FENCE.SESSION", "KEEPALIVE", Long.toUnsignedString(id));
    } catch (FencerException e) {
      checkValid();
      throw e;
    }
    long n = FencerClient.num(r.reply);
    if (n < 1) {
      end(new SessionEndedException("session " + id + " is not open on the server"));
      checkValid();
    }
    boolean check;
    synchronized (this) {
      if (r.sent - sent > 0 && !done.isDone()) {
        sent = r.sent;
        until = r.sent + ttlNs - driftNs;
      }
      check = n - 1 > taken;
      taken = Math.max(taken, n - 1);
    }
    if (check) {
      endTakenLeases();
    }
  }

  /** endTakenLeases ends the leases of locks no longer held under the session. */
  private void endTakenLeases() {
    Object v = client.exchange(client.standard(), "FENCE.SESSION", "INFO", Long.toUnsignedString(id)).reply;
    if (v == null) {
      end(new SessionEndedException("session " + id + " is not open on the server"));
      return;
    }
    List<?> a = FencerClient.asList(v, 3, "FENCE.SESSION INFO");
    Map<String, Long> held = new HashMap<>();
    if (a.get(2) instanceof List) {
      for (Object o : (List<?>) a.get(2)) {
        if (o instanceof List && ((List<?>) o).size() == 3) {
          List<?> f = (List<?>) o;
          held.put(FencerClient.str(f.get(0)) + "\u0000" + FencerClient.str(f.get(1)), FencerClient.num(f.get(2)));
        }
      }
    }
    List<Lease> lost = new ArrayList<>();
    for (Lease l : leases) {
      Long t = held.get(l.name() + "\u0000" + l.owner());
      if (t == null || t != l.token()) {
        lost.add(l);
      }
    }
    for (Lease l : lost) {
      l.end(new LeaseLostException(l.req().what() + " was taken from session " + id + " (revoked or overwritten)"));
    }
  }

  /**
   * close ends the session: its future completes first (cause
   * {@link ReleasedException}), so that work under its locks stops, then the
   * server releases every lock held under it, handing each to its first
   * waiter. It throws {@link SessionEndedException} if the server says the
   * session was no longer open. Calling it again after it succeeded does
   * nothing.
   */
  @Override
  public void close() {
    synchronized (closeLock) {
      if (closed) {
        return;
      }
      end(new ReleasedException("session " + id + " closed"));
      FencerClient.Result r = client.exchange(client.standard(), "FENCE.SESSION", "CLOSE", Long.toUnsignedString(id));
      closed = true;
      if (FencerClient.num(r.reply) != 1 && !r.uncertainBefore) {
        throw new SessionEndedException("session " + id + " was not open when closed");
      }
    }
  }

  @Override
  public String toString() {
    return "Session[" + Long.toUnsignedString(id) + "]";
  }
}
