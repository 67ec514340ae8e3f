package fencer.javalibs;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.IntFunction;

/**
 * LeaderKill is the scenario every library goes through once: on a
 * three-node cluster of its own, clients connected to a follower; one holds
 * a lock (or the permits, or the latch), another waits for it; the leader
 * is killed with SIGKILL; past the holder's renewal period the holder still
 * holds and the waiter still waits; then the holder lets go and the waiter
 * gets it.
 */
final class LeaderKill {
  private LeaderKill() {}

  /** Scenario is one library's part: its clients on port, and what holding means. */
  interface Scenario extends AutoCloseable {
    /** hold takes the lock as the first client and returns once it holds it. */
    void hold() throws Exception;

    /** waitFor blocks as the second client until it gets the lock; false if it gave up. */
    boolean waitFor() throws Exception;

    /** holds reports whether the first client still holds the lock. */
    boolean holds() throws Exception;

    /** release lets go as the first client. */
    void release() throws Exception;

    @Override
    default void close() throws Exception {}
  }

  /** HOLD_PAST is how long after the new leader the holder must still hold. */
  static final Duration HOLD_PAST = Duration.ofMillis(Clients.WATCHDOG_MS + 1500);

  static void run(IntFunction<Scenario> make) throws Exception {
    Servers.Cluster c = Servers.newCluster(3);
    try {
      Servers.Proc follower = c.follower();
      Servers.Proc leader = c.leader();
      try (Scenario s = make.apply(follower.port)) {
        s.hold();
        CompletableFuture<Boolean> waiter = async(s::waitFor);
        Thread.sleep(500);
        assertFalse(waiter.isDone(), "the waiter waits while the lock is held");
        long killed = System.nanoTime();
        System.out.printf("killing leader %s, clients on %s at %s%n", leader.addr(), follower.addr(), java.time.Instant.now());
        leader.kill();
        Servers.Proc next = c.awaitLeader(leader, Duration.ofSeconds(20));
        long elected = System.nanoTime();
        Thread.sleep(HOLD_PAST.toMillis());
        assertFalse(waiter.isDone(), "the waiter got the lock while its holder held it (or gave up): "
            + (waiter.isDone() ? String.valueOf(waiter.getNow(null)) : ""));
        assertTrue(s.holds(), "the holder still holds after the leader was killed");
        s.release();
        assertTrue(waiter.get(20, TimeUnit.SECONDS), "the waiter gets the lock once it is let go");
        System.out.printf("leader %s killed; %s leads after %d ms%n", leader.addr(), next.addr(),
            TimeUnit.NANOSECONDS.toMillis(elected - killed));
      }
    } finally {
      c.stop();
    }
  }

  static <T> CompletableFuture<T> async(Callable<T> f) {
    return CompletableFuture.supplyAsync(() -> {
      try {
        return f.call();
      } catch (Exception e) {
        throw new RuntimeException(e);
      }
    });
  }
}
