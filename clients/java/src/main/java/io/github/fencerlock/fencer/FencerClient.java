package io.github.fencerlock.fencer;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.LongSupplier;
import java.util.function.Supplier;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.SSLSocketFactory;
import redis.clients.jedis.CommandArguments;
import redis.clients.jedis.Connection;
import redis.clients.jedis.commands.ProtocolCommand;
import redis.clients.jedis.exceptions.JedisConnectionException;
import redis.clients.jedis.exceptions.JedisDataException;

/**
 * FencerClient talks to a fencer cluster through any subset of its nodes'
 * client addresses. Every node accepts every command (followers forward to
 * the leader), so one address is enough while that node is up; give several
 * to survive its loss. The client sends to one address, moves to the leader
 * when it is one of them, and after a timeout or a failure tries the next:
 * acquire, extend and release are safe to repeat for the same owner, and
 * every lease has its own random owner.
 *
 * <p>A FencerClient is safe for concurrent use; create one and share it, and
 * {@link #close} it when done (it is {@link AutoCloseable}).
 *
 * <p><b>Tokens.</b> A fencing token is an unsigned 64-bit number on the wire.
 * The client hands it out as a {@code long}: tokens are positions in the
 * cluster's Raft log, which never reach 2<sup>63</sup>, so a token is never
 * negative. Code that must stay correct for any unsigned value compares
 * tokens with {@link Long#compareUnsigned}, as this client does.
 */
public final class FencerClient implements AutoCloseable {
  static final long DEFAULT_REQUEST_TIMEOUT_MS = 5000;
  static final long DEFAULT_FAILOVER_TIMEOUT_MS = 15000;
  static final double DEFAULT_DRIFT = 0.01;
  /** The first pause between rounds of attempts over all nodes, in ms. */
  static final long MIN_BACKOFF_MS = 50;
  private static final long MAX_BACKOFF_MS = 1000;
  private static final long LEADER_PROBE_TIMEOUT_MS = 1000;

  /** Config is the client's settings, fixed at build time. */
  static final class Config {
    long requestTimeoutMs = DEFAULT_REQUEST_TIMEOUT_MS;
    long failoverTimeoutMs = DEFAULT_FAILOVER_TIMEOUT_MS;
    double drift = DEFAULT_DRIFT;
    String user;
    String password;
    SSLSocketFactory sslSocketFactory;
    SSLParameters sslParameters;

    SSLParameters sslParameters() {
      if (sslParameters != null) {
        return sslParameters;
      }
      // Check each node's certificate against the host of its address.
      SSLParameters p = new SSLParameters();
      p.setEndpointIdentificationAlgorithm("HTTPS");
      return p;
    }
  }

  final Config cfg;
  final List<Node> nodes = new ArrayList<>();
  // cur and probe say where requests go; guarded by this.
  private int cur;
  private boolean probe;
  private volatile boolean closed;
  final ExecutorService pool;
  final ScheduledExecutorService timers;
  final Set<Lease> leases = ConcurrentHashMap.newKeySet();
  final Set<Session> sessions = ConcurrentHashMap.newKeySet();
  final Set<Watch> watches = ConcurrentHashMap.newKeySet();

  private FencerClient(List<String> addrs, Config cfg) {
    this.cfg = cfg;
    for (String a : new LinkedHashSet<>(addrs)) {
      nodes.add(new Node(this, a));
    }
    if (nodes.isEmpty()) {
      throw new InvalidArgumentException("no addresses", "address");
    }
    probe = nodes.size() > 1;
    AtomicInteger n = new AtomicInteger();
    ThreadFactory tf = r -> {
      Thread t = new Thread(r, "fencer-client-" + n.incrementAndGet());
      t.setDaemon(true);
      return t;
    };
    pool = Executors.newCachedThreadPool(tf);
    ScheduledThreadPoolExecutor s = new ScheduledThreadPoolExecutor(1, tf);
    s.setRemoveOnCancelPolicy(true);
    timers = s;
  }

  /**
   * builder starts a client for the nodes at addresses ({@code host:port}
   * client addresses, as given to fencerd {@code --listen} or
   * {@code --advertise}). The client does not connect until its first
   * request.
   *
   * @param addresses one or more node addresses
   * @return a builder
   */
  public static Builder builder(String... addresses) {
    return new Builder(List.of(addresses));
  }

  /**
   * builder starts a client for the nodes at addresses.
   *
   * @param addresses one or more node addresses
   * @return a builder
   */
  public static Builder builder(List<String> addresses) {
    return new Builder(addresses);
  }

  /**
   * connect is {@code builder(addresses).build()}: a client with the
   * default settings.
   *
   * @param addresses one or more node addresses
   * @return the client
   */
  public static FencerClient connect(String... addresses) {
    return builder(addresses).build();
  }

  /** Builder configures a {@link FencerClient}. */
  public static final class Builder {
    private final List<String> addresses;
    private final Config cfg = new Config();

    private Builder(List<String> addresses) {
      this.addresses = List.copyOf(addresses);
    }

    /**
     * requestTimeout bounds one attempt at one node; when it passes, the
     * client tries the next node. A waiting acquire gets its wait on top;
     * renewals use at most half of the lease's remaining validity. The
     * default is 5s.
     *
     * @param d the timeout
     * @return this builder
     */
    public Builder requestTimeout(Duration d) {
      cfg.requestTimeoutMs = positive(d, "requestTimeout");
      return this;
    }

    /**
     * failoverTimeout bounds how long a request keeps trying the nodes while
     * none can serve it (all down, or no leader) before it fails with
     * {@link NoLeaderException} (or {@link UncertainException} if an attempt's
     * outcome was unknown). It should exceed an election. The default is 15s.
     *
     * @param d the timeout
     * @return this builder
     */
    public Builder failoverTimeout(Duration d) {
      cfg.failoverTimeoutMs = positive(d, "failoverTimeout");
      return this;
    }

    /**
     * drift sets the clock drift allowance as a fraction of a lease's TTL:
     * the client counts a lease valid until TTL &times; (1 &minus; factor)
     * &minus; 2ms after it sent the request that granted or extended it, so
     * that its view ends before the server's. The default is 0.01.
     *
     * @param factor in [0, 0.5)
     * @return this builder
     */
    public Builder drift(double factor) {
      if (!(factor >= 0 && factor < 0.5)) {
        throw new InvalidArgumentException("drift " + factor + " is outside [0, 0.5)", "drift");
      }
      cfg.drift = factor;
      return this;
    }

    /**
     * auth makes every connection, to every node, authenticate right after
     * connecting and before any other command ({@code AUTH [user]
     * password}), as fencerd requires with {@code --requirepass} or
     * {@code --users}. A null or empty user is Redis's user "default".
     * Refused credentials fail the request with {@link AuthException} at
     * once. The default is no authentication.
     *
     * @param user the user, or null
     * @param password the password
     * @return this builder
     */
    public Builder auth(String user, String password) {
      if (password == null || password.isEmpty()) {
        throw new InvalidArgumentException("auth needs a password", "password");
      }
      cfg.user = user == null || user.isEmpty() ? null : user;
      cfg.password = password;
      return this;
    }

    /**
     * tls dials every node over TLS with ctx (trust a private CA through its
     * trust managers; present a client certificate through its key managers),
     * as fencerd serves it with {@code --tls-cert-file}. Each node's
     * certificate is checked against the host of its address. A certificate
     * that fails to verify fails the request with {@link TlsException} at
     * once. The default is plain TCP.
     *
     * @param ctx the TLS context
     * @return this builder
     */
    public Builder tls(SSLContext ctx) {
      return tls(ctx, null);
    }

    /**
     * tls is {@link #tls(SSLContext)} with the parameters of each TLS socket
     * (such as another endpoint identification, or SNI names); null keeps
     * the default: HTTPS-style host name checks.
     *
     * @param ctx the TLS context
     * @param params the socket parameters, or null
     * @return this builder
     */
    public Builder tls(SSLContext ctx, SSLParameters params) {
      cfg.sslSocketFactory = ctx.getSocketFactory();
      cfg.sslParameters = params;
      return this;
    }

    /**
     * build makes the client. It does not connect.
     *
     * @return the client
     */
    public FencerClient build() {
      return new FencerClient(addresses, cfg);
    }

    private static long positive(Duration d, String what) {
      if (d == null || d.isNegative() || d.isZero()) {
        throw new InvalidArgumentException(what + " " + d + " is not positive", what);
      }
      return d.toMillis();
    }
  }

  /**
   * addresses returns the addresses the client was given, without duplicates.
   *
   * @return the addresses
   */
  public List<String> addresses() {
    List<String> a = new ArrayList<>();
    for (Node n : nodes) {
      a.add(n.addr);
    }
    return a;
  }

  // ---- leases

  /**
   * acquire waits for the lock name in the server's FIFO queue (no
   * polling) and returns a lease on it with a fresh random owner, the
   * default TTL (8s) and no renewal.
   *
   * @param name the lock's name
   * @return the lease
   * @throws InterruptedException if the thread is interrupted while waiting
   * @see #acquire(String, LeaseOptions)
   */
  public Lease acquire(String name) throws InterruptedException {
    return acquire(name, new LeaseOptions());
  }

  /**
   * acquire waits for the lock name in the server's queue, first come first
   * served, until it is granted, the wait of opts runs out
   * ({@link LockedException}) or the thread is interrupted. Each wait on the
   * server lasts about half the TTL and the next starts before it ends,
   * keeping the place in the queue, so that a grant never arrives with its
   * validity spent. Transient failures (a node down, an election) are retried
   * on the other addresses; an acquire whose outcome stays unknown throws
   * {@link UncertainException} and is released in the background.
   *
   * @param name the lock's name
   * @param opts the lease's options
   * @return the lease
   * @throws InterruptedException if the thread is interrupted while waiting
   */
  public Lease acquire(String name, LeaseOptions opts) throws InterruptedException {
    return acquire(Lease.Req.plain(name, opts), opts, true, true);
  }

  /**
   * tryAcquire is acquire without waiting: it throws
   * {@link LockedException} at once if another owner holds the lock.
   *
   * @param name the lock's name
   * @return the lease
   */
  public Lease tryAcquire(String name) {
    return tryAcquire(name, new LeaseOptions());
  }

  /**
   * tryAcquire is acquire without waiting.
   *
   * @param name the lock's name
   * @param opts the lease's options (its wait is ignored)
   * @return the lease
   */
  public Lease tryAcquire(String name, LeaseOptions opts) {
    return tryAcquire(Lease.Req.plain(name, opts), opts);
  }

  Lease tryAcquire(Lease.Req q, LeaseOptions opts) {
    try {
      return acquire(q, opts, false, true);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("unreachable: an acquire without a wait was interrupted", e);
    }
  }

  Lease acquire(Lease.Req q, LeaseOptions opts, boolean wait, boolean interruptible) throws InterruptedException {
    return Lease.acquire(this, q, opts, wait, interruptible);
  }

  /**
   * newFencedLock returns a {@link java.util.concurrent.locks.Lock} on the
   * lock name, shaped like Hazelcast's FencedLock, whose leases are renewed in
   * the background. It does not lock it.
   *
   * @param name the lock's name
   * @return the lock
   */
  public FencedLock newFencedLock(String name) {
    return new FencedLock(this, name, new LeaseOptions());
  }

  /**
   * newFencedLock returns a FencedLock whose leases take opts (a TTL, or a
   * session); they are renewed in the background whatever opts says.
   *
   * @param name the lock's name
   * @param opts the leases' options
   * @return the lock
   */
  public FencedLock newFencedLock(String name, LeaseOptions opts) {
    return new FencedLock(this, name, opts);
  }

  /**
   * newReadWriteLock returns the read-write lock name; opts apply to each of
   * its leases. It does not lock it.
   *
   * @param name the lock's name
   * @param opts the leases' options
   * @return the read-write lock
   */
  public FencedReadWriteLock newReadWriteLock(String name, LeaseOptions opts) {
    return new FencedReadWriteLock(this, name, opts);
  }

  /**
   * newSemaphore returns the semaphore name with permits permits (the
   * server allows 1 to 1024); opts apply to each permit's lease.
   *
   * @param name the semaphore's name
   * @param permits its number of permits
   * @param opts the leases' options
   * @return the semaphore
   */
  public FencedSemaphore newSemaphore(String name, int permits, LeaseOptions opts) {
    return new FencedSemaphore(this, name, permits, opts);
  }

  /**
   * openSession opens a session on the server, which locks can be held
   * under, and keeps it alive in the background until it is closed or lost.
   *
   * @param ttl the session's time to live (the server accepts 100ms to 24h)
   * @return the session
   */
  public Session openSession(Duration ttl) {
    return Session.open(this, ttl);
  }

  /**
   * newElection returns one campaigner's handle on the election name, for
   * campaigns under session s. Leadership ends with the session.
   *
   * @param s the session
   * @param name the election's name
   * @return the election
   */
  public Election newElection(Session s, String name) {
    return new Election(this, s, name);
  }

  // ---- reads

  /**
   * status returns the current grant of the lock name, or empty if it is
   * free. The read is linearizable.
   *
   * @param name the lock's name
   * @return its holder
   */
  public Optional<Status> status(String name) {
    Object v = exchange(standard(), "FENCE.STATUS", name).reply;
    if (v == null) {
      return Optional.empty();
    }
    List<?> a = asList(v, 3, "FENCE.STATUS");
    return Optional.of(new Status(str(a.get(0)), num(a.get(1)), Duration.ofMillis(num(a.get(2)))));
  }

  /**
   * check reports whether token is the current, unexpired grant of the lock
   * name. A point-in-time answer, for diagnostics: to protect data, the
   * storage must compare tokens itself.
   *
   * @param name the lock's name
   * @param token a fencing token
   * @return whether it is current
   */
  public boolean check(String name, long token) {
    return num(exchange(standard(), "FENCE.CHECK", name, Long.toUnsignedString(token)).reply) == 1;
  }

  /**
   * tokenFor returns the fencing token of the lock key that value holds,
   * however it was taken ({@code SET key value NX PX ms}, a Redlock script,
   * another client): {@code FENCE.TOKEN key value}. For a hash (Redisson's
   * lock) value is the field. Throws {@link LeaseLostException} if value
   * does not hold key.
   *
   * @param key the lock's key
   * @param value the holder's value (or hash field)
   * @return the token
   */
  public long tokenFor(String key, String value) {
    Object v = exchange(standard(), "FENCE.TOKEN", key, value).reply;
    if (v == null) {
      throw new LeaseLostException("\"" + value + "\" does not hold \"" + key + "\"");
    }
    return num(v);
  }

  // ---- watches

  /**
   * watch starts watching the lock name on one of the client's nodes (a
   * follower serves it from its own log, as well as the leader) and returns
   * once a node accepted it. The first event is a {@link Watch.Kind#RESET}
   * with the current state; every change follows, in position order, to
   * listener, on the watch's own thread.
   *
   * @param name the lock's name
   * @param listener receives the events
   * @return the watch
   */
  public Watch watch(String name, java.util.function.Consumer<Watch.Event> listener) {
    return Watch.start(this, name, false, 0, listener);
  }

  /**
   * watch starts watching the lock name after position from (an event's
   * position seen earlier): every change after it is delivered, or, if the
   * node no longer retains them all, a reset first.
   *
   * @param name the lock's name
   * @param from the position to resume after
   * @param listener receives the events
   * @return the watch
   */
  public Watch watch(String name, long from, java.util.function.Consumer<Watch.Event> listener) {
    return Watch.start(this, name, true, from, listener);
  }

  synchronized int current() {
    return cur;
  }

  // ---- closing

  boolean isClosed() {
    return closed;
  }

  ClosedException closedException() {
    return new ClosedException("client closed");
  }

  /**
   * close ends every lease and session of the client (their
   * {@code done()} futures complete with a {@link ClosedException}; the
   * server frees them when their TTL passes) and closes every connection.
   * Release leases first to free them at once.
   */
  @Override
  public void close() {
    if (closed) {
      return;
    }
    closed = true;
    ClosedException c = closedException();
    for (Lease l : leases) {
      l.end(c);
    }
    for (Session s : sessions) {
      s.end(c);
    }
    for (Watch w : watches) {
      w.end(c);
    }
    for (Node n : nodes) {
      n.closeAll();
    }
    pool.shutdownNow();
    timers.shutdownNow();
    try {
      pool.awaitTermination(5, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    for (Node n : nodes) {
      n.closeAll();
    }
  }

  // ---- sending

  /** Policy is how one request is retried. */
  static final class Policy {
    final LongSupplier attemptMs;
    final long failoverMs;
    final Supplier<FencerException> stop;

    Policy(LongSupplier attemptMs, long failoverMs, Supplier<FencerException> stop) {
      this.attemptMs = attemptMs;
      this.failoverMs = failoverMs;
      this.stop = stop;
    }
  }

  /** Result is a reply and when (System.nanoTime) the attempt that produced it was sent. */
  static final class Result {
    final Object reply;
    final long sent;
    /** An earlier attempt's outcome was unknown (it may have taken effect). */
    final boolean uncertainBefore;

    Result(Object reply, long sent, boolean uncertainBefore) {
      this.reply = reply;
      this.sent = sent;
      this.uncertainBefore = uncertainBefore;
    }
  }

  Policy standard() {
    return new Policy(() -> cfg.requestTimeoutMs, cfg.failoverTimeoutMs, () -> null);
  }

  Policy standard(Supplier<FencerException> stop) {
    return new Policy(() -> cfg.requestTimeoutMs, cfg.failoverTimeoutMs, stop);
  }

  /**
   * exchange sends args to the current node and returns the reply. Transient
   * failures are retried on the next node, and after a round over all nodes
   * with a growing pause, until the policy's stop says so or its failover
   * time runs out. Only commands that are safe to repeat go through it.
   * Giving up throws an UncertainException if an attempt's outcome was
   * unknown, else a NoLeaderException.
   */
  Result exchange(Policy p, Object... args) {
    long start = System.nanoTime();
    long backoff = MIN_BACKOFF_MS;
    Failure last = null;
    boolean uncertain = false;
    for (int tries = 1; ; tries++) {
      if (closed) {
        throw closedException();
      }
      FencerException stop = p.stop.get();
      if (stop != null) {
        throw stop;
      }
      long timeout = p.attemptMs.getAsLong();
      if (timeout <= 0) {
        throw unavailable(last, uncertain);
      }
      Node n = pick(timeout);
      long sent = System.nanoTime();
      Failure f;
      try {
        return new Result(attempt(n, timeout, args), sent, uncertain);
      } catch (AttemptFailed e) {
        f = e.failure;
      }
      if (!f.transientFailure) {
        throw f.error;
      }
      last = f;
      uncertain |= f.unknown;
      failed(n, f.leader);
      if (p.failoverMs > 0 && elapsedMs(start) >= p.failoverMs) {
        throw unavailable(last, uncertain);
      }
      if (tries % nodes.size() == 0) {
        long pause = jitter(backoff);
        if (p.failoverMs > 0) {
          pause = Math.min(pause, p.failoverMs - elapsedMs(start));
        }
        sleepQuietly(pause);
        backoff = Math.min(2 * backoff, MAX_BACKOFF_MS);
        if (p.failoverMs > 0 && elapsedMs(start) >= p.failoverMs) {
          throw unavailable(last, uncertain);
        }
      }
    }
  }

  static FencerException unavailable(Failure last, boolean uncertain) {
    String detail = last == null ? "" : " (last error: " + last.error.getMessage() + ")";
    Throwable cause = last == null ? null : last.error;
    if (uncertain) {
      return new UncertainException("outcome unknown: no node settled it in time" + detail, null, cause);
    }
    return new NoLeaderException("no leader reachable" + detail, null, cause);
  }

  /** AttemptFailed carries one attempt's sorted failure. */
  static final class AttemptFailed extends Exception {
    private static final long serialVersionUID = 1L;
    final transient Failure failure;

    AttemptFailed(Failure failure) {
      super(failure.error.getMessage(), null, false, false);
      this.failure = failure;
    }
  }

  /**
   * attempt sends one command to n on a borrowed connection. A failure after
   * sending (a timeout: the node may hang) closes that connection.
   */
  Object attempt(Node n, long timeoutMs, Object[] args) throws AttemptFailed {
    Connection c;
    try {
      c = n.borrow(timeoutMs);
    } catch (Node.ConnectFailure e) {
      throw new AttemptFailed(Failure.network(e.getCause(), false));
    }
    return send(n, c, timeoutMs, args, true);
  }

  /** send runs one command on c, giving c back to n (if giveBack) or closing it. */
  Object send(Node n, Connection c, long timeoutMs, Object[] args, boolean giveBack) throws AttemptFailed {
    try {
      c.setSoTimeout((int) Math.max(1, Math.min(timeoutMs, Integer.MAX_VALUE)));
      Object v = c.executeCommand(command(args));
      if (giveBack) {
        n.giveBack(c);
      }
      return v;
    } catch (JedisDataException e) {
      if (giveBack) {
        n.giveBack(c);
      }
      throw new AttemptFailed(Failure.reply(e));
    } catch (JedisConnectionException e) {
      n.discard(c);
      if (closed) {
        throw closedException();
      }
      throw new AttemptFailed(Failure.network(e, true));
    } catch (RuntimeException e) {
      n.discard(c);
      if (closed) {
        throw closedException();
      }
      throw new AttemptFailed(Failure.network(e, true));
    }
  }

  static CommandArguments command(Object[] args) {
    String name = String.valueOf(args[0]);
    byte[] raw = name.getBytes(StandardCharsets.UTF_8);
    ProtocolCommand cmd = () -> raw;
    CommandArguments a = new CommandArguments(cmd);
    for (int i = 1; i < args.length; i++) {
      Object o = args[i];
      if (o instanceof byte[]) {
        a.add((byte[]) o);
      } else {
        a.add(String.valueOf(o));
      }
    }
    return a;
  }

  /**
   * pick returns the node to send the next request to. After a failure (and
   * at first use, with several addresses) it asks that node who leads, and
   * moves to the leader if it is one of the client's addresses, saving the
   * forwarding hop.
   */
  Node pick(long timeoutMs) {
    Node n;
    synchronized (this) {
      n = nodes.get(cur);
      if (!probe) {
        return n;
      }
      probe = false;
    }
    Object v;
    try {
      v = attempt(n, Math.min(LEADER_PROBE_TIMEOUT_MS, Math.min(timeoutMs, cfg.requestTimeoutMs)), new Object[] {"FENCE.LEADER"});
    } catch (AttemptFailed e) {
      if (e.failure.error instanceof AuthException || e.failure.error instanceof TlsException) {
        throw e.failure.error;
      }
      return n;
    }
    if (!(v instanceof List) || ((List<?>) v).size() != 2) {
      return n;
    }
    Node l = nodeAt(str(((List<?>) v).get(1)));
    synchronized (this) {
      if (l != null && nodes.get(cur) == n) {
        cur = nodes.indexOf(l);
      }
      return nodes.get(cur);
    }
  }

  /**
   * failed moves requests off n after a transient failure: to the leader the
   * node named, if the client knows that address, else to the next.
   */
  synchronized void failed(Node n, String leader) {
    if (nodes.get(cur) != n) {
      return;
    }
    Node l = nodeAt(leader);
    if (l != null && l != n) {
      cur = nodes.indexOf(l);
      return;
    }
    cur = (cur + 1) % nodes.size();
    probe = nodes.size() > 1;
  }

  Node nodeAt(String addr) {
    if (addr == null || addr.isEmpty()) {
      return null;
    }
    for (Node n : nodes) {
      if (n.addr.equals(addr)) {
        return n;
      }
    }
    return null;
  }

  // ---- helpers

  static long elapsedMs(long since) {
    return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - since);
  }

  /** jitter spreads d over [d/2, d) so that clients do not retry in step. */
  static long jitter(long d) {
    return d / 2 + (long) (ThreadLocalRandom.current().nextDouble() * (d / 2.0));
  }

  static void sleepQuietly(long ms) {
    if (ms <= 0) {
      return;
    }
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  static String str(Object o) {
    if (o == null) {
      return null;
    }
    if (o instanceof byte[]) {
      return new String((byte[]) o, StandardCharsets.UTF_8);
    }
    return String.valueOf(o);
  }

  static long num(Object o) {
    if (o instanceof Long) {
      return (Long) o;
    }
    if (o instanceof byte[]) {
      try {
        return Long.parseUnsignedLong(str(o));
      } catch (NumberFormatException e) {
        // fall through
      }
    }
    throw new UncertainException("unexpected reply: " + str(o) + " where an integer was expected");
  }

  static List<?> asList(Object v, int size, String what) {
    if (!(v instanceof List) || ((List<?>) v).size() < size) {
      throw new UncertainException("unexpected reply to " + what + ": " + v);
    }
    return (List<?>) v;
  }

  static String millis(long ms) {
    return Long.toString(Math.max(ms, 1));
  }
}
