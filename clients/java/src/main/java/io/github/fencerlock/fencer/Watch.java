package io.github.fencerlock.fencer;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * Watch is a stream of the changes of one lock, pushed by the server
 * ({@code FENCE.WATCH}): no polling. Any node serves it from its own log.
 * It survives the loss of its node: it reconnects to another of the
 * client's addresses and resumes after the last event it delivered, so
 * nothing is delivered twice and nothing is skipped without a
 * {@link Kind#RESET} saying so. Events reach the listener one at a time, in
 * position order, on the watch's own thread; a listener that does not keep
 * up is sent a reset rather than hold the server back.
 *
 * <p>A watch runs until {@link #close()}, the client's close, or a failure:
 * no node reachable for the failover timeout, or a node that refused it
 * (authentication, permission, a bad name); {@link #done()} completes then
 * with the cause (null after {@link #close()}).
 */
public final class Watch implements AutoCloseable {
  /** The kinds of event (docs/protocol.md, Watches). */
  public enum Kind {
    /** The lock is held by a new grant (owner, token). Renewals are not events. */
    GRANTED,
    /** The holder (owner, token) released the lock. */
    RELEASED,
    /** The lease (owner, token) ran out. */
    EXPIRED,
    /** The lease (owner, token) was revoked. */
    REVOKED,
    /**
     * Changes before the position were skipped; owner and token are the
     * holder as of the position (token 0: free). The first event of a watch
     * started without a position to resume from.
     */
    RESET,
    /** The holder of a lock under a session (an election's leader) announced a new value. */
    PROCLAIMED
  }

  /**
   * Event is one change of a watched lock.
   *
   * @param kind what happened
   * @param name the lock's name
   * @param position the position of the command that made the change in
   *     the cluster's log (for a reset, the position the state was read at);
   *     several events of one command share it
   * @param owner the holder the event is about
   * @param token that grant's fencing token (unsigned; 0 in a reset of a free lock)
   * @param value the lock's value under a session, in granted, proclaimed and reset events
   */
  public record Event(Kind kind, String name, long position, String owner, long token, String value) {}

  private final FencerClient client;
  private final String name;
  private final Consumer<Event> listener;
  private final CompletableFuture<FencerException> done = new CompletableFuture<>();
  private volatile boolean closed;
  private volatile Socket socket;
  // The resume point, used by the watch's thread only: the last position
  // delivered, and how many events at it (a reset covers them all).
  private boolean delivered;
  private long last;
  private int atLast;
  private boolean lastReset;
  private final boolean resume;
  private final long from;

  private Watch(FencerClient client, String name, boolean resume, long from, Consumer<Event> listener) {
    this.client = client;
    this.name = name;
    this.resume = resume;
    this.from = from;
    this.listener = listener;
  }

  static Watch start(FencerClient c, String name, boolean resume, long from, Consumer<Event> listener) {
    if (name == null || name.isEmpty()) {
      throw new InvalidArgumentException("empty lock name", "key");
    }
    Watch w = new Watch(c, name, resume, from, listener);
    c.watches.add(w);
    w.done.whenComplete((v, e) -> c.watches.remove(w));
    if (c.isClosed()) {
      w.end(c.closedException());
      throw c.closedException();
    }
    CountDownLatch started = new CountDownLatch(1);
    try {
      c.pool.execute(() -> w.run(started));
    } catch (RejectedExecutionException e) {
      throw c.closedException();
    }
    try {
      while (!started.await(50, TimeUnit.MILLISECONDS)) {
        if (w.done.isDone()) {
          FencerException cause = w.done.getNow(null);
          throw cause != null ? cause : c.closedException();
        }
      }
    } catch (InterruptedException e) {
      w.close();
      Thread.currentThread().interrupt();
      throw new ClosedException("interrupted while starting a watch", null, e);
    }
    return w;
  }

  /**
   * The watched lock's name.
   *
   * @return the name
   */
  public String name() {
    return name;
  }

  /**
   * A future that completes when the watch ends: with the failure, or
   * {@link ClosedException} if the client was closed, or null after
   * {@link #close()}.
   *
   * @return the future
   */
  public CompletableFuture<FencerException> done() {
    return done.copy();
  }

  /** close ends the watch: no event is delivered once it has returned. */
  @Override
  public void close() {
    end(null);
  }

  /** end stops the watch: its socket is closed, which ends any read. */
  void end(FencerException cause) {
    closed = true;
    Socket s = socket;
    if (s != null) {
      try {
        s.close();
      } catch (IOException e) {
        // closing
      }
    }
    done.complete(cause);
  }

  /** run keeps a session with one node after another until the watch ends. */
  private void run(CountDownLatch started) {
    int idx = client.current();
    long backoff = FencerClient.MIN_BACKOFF_MS;
    long failingSince = System.nanoTime();
    Failure last = null;
    for (int tries = 1; ; tries++) {
      Node n = client.nodes.get(Math.floorMod(idx, client.nodes.size()));
      Failure f = null;
      boolean ok = false;
      try {
        ok = session(n, started);
      } catch (SessionFailure e) {
        ok = e.accepted;
        f = e.failure;
      }
      if (ok) {
        started = null;
        failingSince = System.nanoTime();
        backoff = FencerClient.MIN_BACKOFF_MS;
        tries = 0;
      }
      if (client.isClosed()) {
        done.complete(client.closedException());
        return;
      }
      if (closed || done.isDone()) {
        done.complete(null);
        return;
      }
      if (f != null) {
        if (!f.transientFailure) {
          done.complete(f.error);
          return;
        }
        last = f;
      }
      if (FencerClient.elapsedMs(failingSince) >= client.cfg.failoverTimeoutMs) {
        done.complete(FencerClient.unavailable(last, false));
        return;
      }
      idx++;
      if (tries % client.nodes.size() == 0) {
        FencerClient.sleepQuietly(FencerClient.jitter(backoff));
        backoff = Math.min(2 * backoff, 1000);
      }
    }
  }

  /** SessionFailure is how a session with one node ended. */
  private static final class SessionFailure extends Exception {
    private static final long serialVersionUID = 1L;
    final transient Failure failure;
    final boolean accepted;

    SessionFailure(Failure failure, boolean accepted) {
      super(failure.error.getMessage(), null, false, false);
      this.failure = failure;
      this.accepted = accepted;
    }
  }

  /**
   * session watches on n until the connection fails or the watch ends; it
   * returns (or its failure says) whether n accepted the watch.
   */
  private boolean session(Node n, CountDownLatch started) throws SessionFailure {
    FencerClient.Config cfg = client.cfg;
    int rt = (int) Math.min(cfg.requestTimeoutMs, Integer.MAX_VALUE);
    Socket s;
    try {
      s = n.socket(rt);
    } catch (RuntimeException e) {
      throw new SessionFailure(Failure.network(e, false), false);
    }
    socket = s;
    if (closed) {
      close();
      return false;
    }
    boolean accepted = false;
    ScheduledFuture<?> pinger = null;
    try {
      OutputStream out = new BufferedOutputStream(s.getOutputStream());
      InputStream in = new BufferedInputStream(s.getInputStream());
      List<String> hello = new ArrayList<>(List.of("HELLO", "3"));
      if (cfg.password != null) {
        hello.addAll(List.of("AUTH", cfg.user == null ? "default" : cfg.user, cfg.password));
      }
      Resp.write(out, hello.toArray(new String[0]));
      List<String> args = new ArrayList<>(List.of("FENCE.WATCH", name));
      long[] fromPos = resumeFrom();
      if (fromPos != null) {
        args.add("FROM");
        args.add(Long.toUnsignedString(fromPos[0]));
      }
      Resp.write(out, args.toArray(new String[0]));
      out.flush();
      s.setSoTimeout(rt);
      for (int i = 0; i < 2; i++) {
        Object v = Resp.read(in);
        if (v instanceof Resp.Error) {
          throw new SessionFailure(Failure.reply(((Resp.Error) v).message, null), false);
        }
        if (i == 1 && !(v instanceof Resp.Push && "fence.watch".equals(str(((Resp.Push) v).elems, 0)))) {
          throw new SessionFailure(Failure.network(new IOException("unexpected reply to FENCE.WATCH: " + v), false), false);
        }
      }
      accepted = true;
      if (started != null) {
        started.countDown();
      }
      // A node that stops answering (paused, cut off) is found by pinging
      // it: PING is served between the pushes.
      long every = Math.max(cfg.requestTimeoutMs / 2, 100);
      s.setSoTimeout((int) Math.min(every + cfg.requestTimeoutMs, Integer.MAX_VALUE));
      pinger = client.timers.scheduleAtFixedRate(() -> {
        synchronized (out) {
          try {
            Resp.write(out, "PING");
            out.flush();
          } catch (IOException e) {
            // the reader sees the connection fail
          }
        }
      }, every, every, TimeUnit.MILLISECONDS);
      int skip = skipAtLast();
      for (;;) {
        Object v = Resp.read(in);
        if (v instanceof Resp.Error) {
          throw new SessionFailure(Failure.reply(((Resp.Error) v).message, null), true);
        }
        if (!(v instanceof Resp.Push) || ((Resp.Push) v).elems.size() != 7
            || !"fence.event".equals(str(((Resp.Push) v).elems, 0))) {
          continue; // PONG
        }
        List<Object> e = ((Resp.Push) v).elems;
        Kind kind;
        try {
          kind = Kind.valueOf(str(e, 2).toUpperCase(Locale.ROOT));
        } catch (IllegalArgumentException unknown) {
          continue; // a kind of a later version
        }
        Event ev = new Event(kind, str(e, 1), FencerClient.num(e.get(3)), str(e, 4), FencerClient.num(e.get(5)), str(e, 6));
        if (ev.kind() == Kind.RESET && delivered && Long.compareUnsigned(ev.position(), last) < 0) {
          // A state older than what was delivered: it covers no event that
          // was not delivered, and the events after it come next.
          continue;
        }
        if (ev.kind() != Kind.RESET && delivered && Long.compareUnsigned(ev.position(), last) <= 0) {
          // Resumed from just before the last position: the events at it
          // that were delivered come again first; anything a reset or an
          // earlier position covered is not delivered again.
          if (Long.compareUnsigned(ev.position(), last) < 0 || lastReset) {
            continue;
          }
          if (skip > 0) {
            skip--;
            continue;
          }
          atLast++;
          deliver(ev);
          continue;
        }
        if (ev.kind() == Kind.RESET) {
          lastReset = true;
          atLast = 0;
        } else {
          lastReset = false;
          atLast = 1;
        }
        delivered = true;
        last = ev.position();
        skip = 0;
        deliver(ev);
      }
    } catch (IOException | RuntimeException e) {
      if (e instanceof FencerException && !(e instanceof UncertainException)) {
        throw new SessionFailure(Failure.fatal((FencerException) e), accepted);
      }
      throw new SessionFailure(Failure.network(e, false), accepted);
    } finally {
      if (pinger != null) {
        pinger.cancel(false);
      }
      try {
        s.close();
      } catch (IOException e) {
        // closing
      }
    }
  }

  private void deliver(Event ev) {
    if (closed) {
      throw new ClosedException("watch closed");
    }
    try {
      listener.accept(ev);
    } catch (RuntimeException e) {
      // The listener's failure ends the watch: delivering the event again
      // elsewhere would fail the same way.
      throw new ServerException("watch of \"" + name + "\": the listener threw " + e, null, e);
    }
  }

  /** resumeFrom is the FROM of the next FENCE.WATCH, or null for none. */
  private long[] resumeFrom() {
    if (!delivered) {
      return resume ? new long[] {from} : null;
    }
    if (lastReset || last == 0) {
      return new long[] {last};
    }
    return new long[] {last - 1};
  }

  /** skipAtLast is how many events at the last position a resumed session must not deliver again. */
  private int skipAtLast() {
    return !delivered || lastReset ? 0 : atLast;
  }

  private static String str(List<Object> e, int i) {
    Object o = e.get(i);
    return o == null ? "" : String.valueOf(o);
  }
}
