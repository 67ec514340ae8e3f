package io.github.fencerlock.fencer;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import redis.clients.jedis.Connection;

/**
 * Waiter queues for a lock on the server ({@code WAIT}) in overlapping
 * rounds, each on a connection of its own (the Go client's wait.go and the
 * Node.js client's wait.js are the reference).
 *
 * <p>A new round starts halfway through the current one, and the server puts
 * it in the older one's place in the line (one waiter per key and owner),
 * answering the older one null. So the place in the queue is kept while no
 * single wait lasts longer than half the TTL, and a grant arriving at the
 * very end of a wait still has half its validity. There is no polling: a
 * round ends early only if it is granted or replaced. A round's own
 * connection never holds up other requests, and closing it when the caller
 * gives up takes the waiter out of the server's queue at once.
 *
 * <p>A round may still be in flight when another brings the grant (it was
 * sent before that reply came). It reaches the server while the owner holds
 * the lock and gets the same grant back, renewed; but if the caller had
 * released by then, the server would grant it anew, with a new token, to an
 * owner nobody holds a lease for: for a read lock or a permit, whose
 * holder's release the server does not remember (WaitRoundsTest). So the
 * grant is returned once the rounds in flight have come back, within a
 * bound; and a round that comes back later with another token has its grant
 * released at once. Cutting such a round off instead could make the server
 * revoke the very grant it was delivering on that connection.
 */
final class Waiter {
  /** Caps one wait whatever the TTL (and stays below the server's --max-wait). */
  private static final long MAX_ROUND_MS = 30000;
  /** The shortest wait the client falls back to when the server refuses longer ones. */
  private static final long MIN_ROUND_MS = 100;

  private Waiter() {}

  /** RoundResult is what one round ended with. */
  private static final class RoundResult {
    final int id;
    final Node node;
    final Lease.Grant grant;
    final boolean early;
    final Failure failure;

    RoundResult(int id, Node node, Lease.Grant grant, boolean early, Failure failure) {
      this.id = id;
      this.node = node;
      this.grant = grant;
      this.early = early;
      this.failure = failure;
    }
  }

  /** Won is the grant await returned, for the rounds that come back after it. */
  private static final class Won {
    volatile Lease.Grant grant;
  }

  /** Round is one wait in flight: its connection, closed to abort it. */
  private static final class Round {
    volatile Connection conn;
    volatile Node node;
    volatile boolean aborted;

    void abort() {
      aborted = true;
      Connection c = conn;
      if (c != null && node != null) {
        node.discard(c);
      }
    }
  }

  /**
   * await waits until q is granted and returns the grant, or returns null
   * (the caller throws LockedException) when deadline (System.nanoTime, or
   * Lease.FOREVER) passes. Interrupts end the wait with InterruptedException
   * if interruptible; otherwise they are kept for the caller (Lock.lock).
   */
  static Lease.Grant await(FencerClient c, Lease.Req q, long deadline, boolean interruptible)
      throws InterruptedException {
    long round = Math.max(Math.min(q.ttlMs / 2, MAX_ROUND_MS), 1);
    LinkedBlockingQueue<RoundResult> results = new LinkedBlockingQueue<>();
    Set<Round> rounds = ConcurrentHashMap.newKeySet();
    int[] latest = {0};
    Won won = new Won();
    boolean interrupted = false;
    boolean done = false;
    try {
      long roundMs = round;
      start(c, q, roundMs, deadline, results, rounds, latest, won);
      long nextAt = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(roundMs / 2);
      Long failedSince = null;
      Failure last = null;
      boolean uncertain = false;
      int failures = 0;
      int refusals = 0;
      for (;;) {
        if (c.isClosed()) {
          throw c.closedException();
        }
        FencerException stop = q.session == null ? null : q.session.cause();
        if (stop != null) {
          throw stop;
        }
        long until = deadline == Lease.FOREVER ? nextAt : Math.min(nextAt, deadline);
        RoundResult r;
        try {
          r = results.poll(Math.max(0, until - System.nanoTime()), TimeUnit.NANOSECONDS);
        } catch (InterruptedException e) {
          if (interruptible) {
            throw e;
          }
          interrupted = true;
          continue;
        }
        long now = System.nanoTime();
        if (r == null) {
          if (deadline != Lease.FOREVER && now - deadline >= 0) {
            if (uncertain) {
              throw new UncertainException("acquire " + q.what() + ": the wait ran out while an attempt's outcome was unknown"
                  + " (last error: " + last.error.getMessage() + ")", null, last.error);
            }
            if (last != null) {
              throw new NoLeaderException("acquire " + q.what() + ": the wait ran out while failing (last error: "
                  + last.error.getMessage() + ")", null, last.error);
            }
            return null;
          }
          if (now - nextAt >= 0) {
            refusals = 0; // the latest round was not refused at once
            start(c, q, roundMs, deadline, results, rounds, latest, won);
            nextAt = now + TimeUnit.MILLISECONDS.toNanos(roundMs / 2);
          }
          continue;
        }
        if (r.failure == null && r.grant != null) {
          done = true;
          won.grant = r.grant;
          interrupted |= settle(rounds, results, Math.min(c.cfg.requestTimeoutMs, roundMs / 2));
          return r.grant;
        }
        if (r.id != latest[0]) {
          continue; // replaced by a newer round, or failed after it started
        }
        if (r.failure == null && r.early) {
          // Answered null at once, not after waiting. Twice in a row, that
          // is a refusal: the server remembers this owner's release of the
          // lock. Once can also be an older wait of ours taking this one's
          // place, if a node re-sent it after a leader change.
          if (++refusals >= 2) {
            throw new LockedException(q.what() + ": the server refused owner " + q.owner);
          }
          start(c, q, roundMs, deadline, results, rounds, latest, won);
          nextAt = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(roundMs / 2);
          continue;
        }
        if (r.failure == null) {
          // The wait ran out before a newer one took its place (a slow link,
          // or the place was lost in a leader change): queue again at once.
          failedSince = null;
          failures = 0;
          last = null;
          uncertain = false;
          start(c, q, roundMs, deadline, results, rounds, latest, won);
          nextAt = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(roundMs / 2);
          continue;
        }
        Failure f = r.failure;
        if ("wait".equals(f.argument) && roundMs > MIN_ROUND_MS) {
          // The server allows shorter waits (fencerd --max-wait).
          roundMs = Math.max(roundMs / 2, MIN_ROUND_MS);
          start(c, q, roundMs, deadline, results, rounds, latest, won);
          nextAt = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(roundMs / 2);
          continue;
        }
        if (!f.transientFailure) {
          throw f.error;
        }
        last = f;
        uncertain |= f.unknown;
        if (r.node != null) {
          c.failed(r.node, f.leader);
        }
        if (failedSince == null) {
          failedSince = System.nanoTime();
        } else if (FencerClient.elapsedMs(failedSince) >= c.cfg.failoverTimeoutMs) {
          throw FencerClient.unavailable(last, uncertain);
        }
        failures++;
        if (failures % c.nodes.size() == 0) {
          // Every node failed once more: pause before the next round.
          long pause = FencerClient.jitter(Math.min(FencerClient.MIN_BACKOFF_MS << Math.min(failures / c.nodes.size(), 8), 1000));
          nextAt = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(pause);
          continue;
        }
        start(c, q, roundMs, deadline, results, rounds, latest, won);
        nextAt = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(roundMs / 2);
      }
    } finally {
      if (!done) {
        // Given up: hang up every round, which takes the waiter out of the
        // server's queue, and release a grant that may be in flight.
        for (Round rd : rounds) {
          rd.abort();
        }
        Lease.releaseLater(c, q);
      }
      // Rounds still in flight after a grant are left to finish: they can
      // only renew the same lease, and cutting one off could make the
      // server revoke a grant it was delivering.
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /**
   * settle waits up to boundMs for the rounds still in flight to come back;
   * it returns whether the thread was interrupted meanwhile (kept for the
   * caller: the grant is held).
   */
  private static boolean settle(Set<Round> rounds, LinkedBlockingQueue<RoundResult> results, long boundMs) {
    long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(Math.max(boundMs, 1));
    boolean interrupted = false;
    while (!rounds.isEmpty()) {
      long left = end - System.nanoTime();
      if (left <= 0) {
        break;
      }
      try {
        results.poll(Math.min(left, TimeUnit.MILLISECONDS.toNanos(5)), TimeUnit.NANOSECONDS);
      } catch (InterruptedException e) {
        interrupted = true;
      }
    }
    return interrupted;
  }

  private static void start(FencerClient c, Lease.Req q, long roundMs, long deadline,
      LinkedBlockingQueue<RoundResult> results, Set<Round> rounds, int[] latest, Won won) {
    long left = deadline == Lease.FOREVER ? Long.MAX_VALUE : TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime());
    long wait = Math.min(roundMs, left);
    if (wait < 1) {
      return;
    }
    int id = ++latest[0];
    Round rd = new Round();
    rounds.add(rd);
    try {
      c.pool.execute(() -> {
        Node node = null;
        try {
          node = c.pick(c.cfg.requestTimeoutMs);
          rd.node = node;
          long began = System.nanoTime();
          Lease.Grant g = round(c, node, rd, q, wait);
          Lease.Grant first = won.grant;
          if (g != null && first != null && g.token != first.token) {
            // Granted anew after the caller's lease ended (released, or
            // lost): nobody holds a lease for it.
            Lease.releaseLater(c, q);
          }
          boolean early = g == null && FencerClient.elapsedMs(began) < wait - wait / 10;
          results.add(new RoundResult(id, node, g, early, null));
        } catch (FencerClient.AttemptFailed e) {
          results.add(new RoundResult(id, node, null, false, e.failure));
        } catch (FencerException e) {
          results.add(new RoundResult(id, node, null, false, Failure.fatal(e)));
        } catch (RuntimeException e) {
          results.add(new RoundResult(id, node, null, false, Failure.network(e, true)));
        } finally {
          rounds.remove(rd);
        }
      });
    } catch (RejectedExecutionException e) {
      rounds.remove(rd);
      results.add(new RoundResult(id, null, null, false, Failure.fatal(c.closedException())));
    }
  }

  /**
   * round sends one acquire with WAIT to node on a connection of its own,
   * closed when it ends or the round is aborted (the server then drops the
   * waiter).
   */
  private static Lease.Grant round(FencerClient c, Node node, Round rd, Lease.Req q, long wait)
      throws FencerClient.AttemptFailed {
    long timeout = c.cfg.requestTimeoutMs;
    Connection conn;
    try {
      conn = node.connect(timeout);
    } catch (Node.ConnectFailure e) {
      throw new FencerClient.AttemptFailed(Failure.network(e.getCause(), false));
    }
    rd.conn = conn;
    if (rd.aborted) {
      node.discard(conn);
      throw new FencerClient.AttemptFailed(Failure.fatal(new LockedException("wait given up")));
    }
    try {
      long sent = System.nanoTime();
      Object v = c.send(node, conn, wait + timeout, q.acquireArgs(wait), false);
      return Lease.parseGrant(v, q, sent);
    } finally {
      node.discard(conn);
    }
  }
}
