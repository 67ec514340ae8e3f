package io.github.fencerlock.fencer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** A leader killed (SIGKILL) under a renewing holder, a contender, and a waiter. */
class FailoverTest {
  /**
   * The holder's TTL: its renewals (every TTL/3) must outlast an election
   * (a second or two here), or its own count of validity runs out first,
   * as it should, and the contender or waiter rightly wins.
   */
  static final Duration HOLDER_TTL = Duration.ofSeconds(5);

  /**
   * The holder's lease is renewed in the background while the leader is
   * killed and another elected; a contender tries to take the lock all along.
   * The contender never wins while the holder counts its lease valid, and the
   * holder's lease survives the failover.
   */
  @Test
  void aContenderNeverWinsWhileTheRenewingHolderCountsItselfValid() throws Exception {
    Servers.Cluster cl = Servers.newCluster(3);
    try (FencerClient holderClient = FencerClient.builder(cl.addrs()).build();
        FencerClient contenderClient = FencerClient.builder(cl.addrs()).build()) {
      String k = "failover-holder";
      Lease held = holderClient.acquire(k, new LeaseOptions().ttl(HOLDER_TTL).autoRenew(true));
      List<String> violations = new CopyOnWriteArrayList<>();
      AtomicInteger tries = new AtomicInteger();
      AtomicInteger wins = new AtomicInteger();
      AtomicBoolean stop = new AtomicBoolean();
      Thread contender = new Thread(() -> {
        while (!stop.get()) {
          tries.incrementAndGet();
          try {
            Lease l = contenderClient.tryAcquire(k, new LeaseOptions().ttl(Duration.ofSeconds(2)));
            wins.incrementAndGet();
            if (held.isValid()) {
              violations.add("contender granted token " + l.token() + " at " + Instant.now()
                  + " while the holder counted itself valid until " + held.validUntil());
            }
            l.release();
          } catch (LockedException e) {
            // the holder holds it
          } catch (FencerException e) {
            // an election in progress: try again
          }
          Servers.sleep(20);
        }
      });
      contender.start();
      Thread.sleep(500);
      Servers.Proc leader = cl.leader(Duration.ofSeconds(10));
      long killed = System.nanoTime();
      System.out.println("killing leader " + leader.addr() + " at " + Instant.now());
      leader.kill();
      Servers.Proc next = cl.leader(Duration.ofSeconds(30));
      System.out.println(next.addr() + " leads " + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - killed)
          + " ms after the kill");
      // Past a TTL after the new leader: renewals go on through it.
      Thread.sleep(HOLDER_TTL.toMillis() + 1000);
      stop.set(true);
      contender.join(20000);
      System.out.println("contender tries: " + tries.get() + ", wins: " + wins.get() + ", holder valid: " + held.isValid()
          + ", holder's end: " + held.cause());
      assertEquals(List.of(), violations);
      assertTrue(held.isValid(), "the holder's lease survived the failover: " + held.cause());
      assertEquals(0, wins.get());
      assertEquals(held.token(), contenderClient.status(k).orElseThrow().token());
      held.release();
      try (Lease after = contenderClient.tryAcquire(k)) {
        assertTrue(after.token() > held.token());
      }
    } finally {
      cl.stop();
    }
  }

  /** A waiting acquire keeps waiting across a leader kill and is granted once the holder lets go. */
  @Test
  void aWaitingAcquireAcrossAFailover() throws Exception {
    Servers.Cluster cl = Servers.newCluster(3);
    try (FencerClient holderClient = FencerClient.builder(cl.addrs()).build();
        FencerClient waiterClient = FencerClient.builder(cl.addrs()).build()) {
      String k = "failover-waiter";
      Lease held = holderClient.acquire(k, new LeaseOptions().ttl(HOLDER_TTL).autoRenew(true));
      CompletableFuture<Lease> waiter = CompletableFuture.supplyAsync(() -> {
        try {
          return waiterClient.acquire(k, new LeaseOptions().ttl(Duration.ofSeconds(2)));
        } catch (InterruptedException e) {
          throw new RuntimeException(e);
        }
      });
      List<String> violations = new CopyOnWriteArrayList<>();
      waiter.thenAccept(l -> {
        if (held.isValid()) {
          violations.add("waiter granted token " + l.token() + " at " + Instant.now()
              + " while the holder counted itself valid until " + held.validUntil());
        }
      });
      held.done().thenAccept(cause -> System.out.println("holder's lease ended at " + Instant.now() + ": " + cause));
      Thread.sleep(500);
      assertFalse(waiter.isDone());
      Servers.Proc leader = cl.leader(Duration.ofSeconds(10));
      System.out.println("killing leader " + leader.addr() + " while a waiter waits, at " + Instant.now());
      leader.kill();
      cl.leader(Duration.ofSeconds(30));
      Thread.sleep(HOLDER_TTL.toMillis() + 1000);
      assertEquals(List.of(), violations);
      assertFalse(waiter.isDone(), "the waiter still waits while the holder holds: "
          + (waiter.isDone() ? String.valueOf(waiter.getNow(null)) : ""));
      assertNull(held.cause());
      held.release();
      Lease got = waiter.get(20, TimeUnit.SECONDS);
      System.out.println("waiter granted token " + got.token() + " (holder's " + held.token() + ")");
      assertTrue(got.token() > held.token());
      got.release();
    } finally {
      cl.stop();
    }
  }

  /**
   * An acquire whose outcome cannot be known (the leader stopped with
   * SIGSTOP while the command was forwarded to it, and the client gives up
   * before a new leader settles it) ends in UncertainException, never a
   * "no"; the client releases it in the background, so once the cluster
   * answers again the lock is free, not held by an owner nobody tracks.
   */
  @Test
  void anAcquireWhoseOutcomeIsUnknownIsUncertainAndReleasedLater() throws Exception {
    Servers.Cluster cl = Servers.newCluster(3);
    Servers.Proc leader = cl.leader(Duration.ofSeconds(10));
    Servers.Proc follower = cl.nodes.stream().filter(p -> p != leader).findFirst().orElseThrow();
    // The client gives up well before the others can elect a new leader
    // (raft's election timeout, 1 s at the least, runs from the last
    // heartbeat), so no attempt can be settled by one.
    try (FencerClient c = FencerClient.builder(follower.addr()).requestTimeout(Duration.ofMillis(250))
        .failoverTimeout(Duration.ofMillis(600)).build();
        FencerClient other = FencerClient.builder(cl.addrs()).build()) {
      c.status("warm-up"); // a connection to the follower, and the follower's to the leader
      leader.signal("STOP");
      System.out.println("leader " + leader.addr() + " stopped; acquiring through " + follower.addr());
      FencerException e;
      try {
        c.tryAcquire("uncertain");
        throw new AssertionError("granted while the leader was stopped, before another could be elected");
      } catch (FencerException got) {
        e = got;
      }
      System.out.println("acquire ended with " + e.getClass().getSimpleName() + ": " + e.getMessage());
      assertTrue(e instanceof UncertainException, "not a no: " + e);
      Thread.sleep(1000);
      leader.signal("CONT");
      Servers.await("the lock free after the background release", Duration.ofSeconds(30), () -> {
        try {
          return other.status("uncertain").isEmpty();
        } catch (FencerException f) {
          return false;
        }
      });
      try (Lease l = other.tryAcquire("uncertain")) {
        assertTrue(l.token() > 0);
      }
    } finally {
      leader.signal("CONT");
      cl.stop();
    }
  }
}
