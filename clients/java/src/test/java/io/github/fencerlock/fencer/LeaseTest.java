package io.github.fencerlock.fencer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Leases against a real one-node fencerd: tokens, waits, renewal, loss, release. */
@SuppressWarnings("try")
class LeaseTest {
  static FencerClient c;

  @BeforeAll
  static void start() {
    c = FencerClient.connect(Servers.oneAddr());
  }

  @AfterAll
  static void stop() {
    c.close();
  }

  static String key() {
    return "lease-" + UUID.randomUUID();
  }

  @Test
  void tokensIncreaseAndTryAcquireSaysLocked() throws Exception {
    String k = key();
    long first;
    try (Lease l = c.acquire(k)) {
      first = l.token();
      assertTrue(first > 0);
      assertEquals(k, l.name());
      assertEquals(Duration.ofSeconds(8), l.ttl());
      assertTrue(l.isValid());
      Optional<Status> s = c.status(k);
      assertEquals(l.owner(), s.orElseThrow().owner());
      assertEquals(first, s.orElseThrow().token());
      assertTrue(c.check(k, first));
      assertThrows(LockedException.class, () -> c.tryAcquire(k));
    }
    assertTrue(c.status(k).isEmpty(), "released");
    try (Lease l = c.tryAcquire(k)) {
      assertTrue(Long.compareUnsigned(l.token(), first) > 0, l.token() + " after " + first);
    }
  }

  @Test
  void waitersAreServedInArrivalOrder() throws Exception {
    String k = key();
    Lease holder = c.acquire(k);
    List<Integer> order = Collections.synchronizedList(new ArrayList<>());
    List<CompletableFuture<Long>> waiters = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      int n = i;
      waiters.add(CompletableFuture.supplyAsync(() -> {
        try {
          Lease l = c.acquire(k, new LeaseOptions().ttl(Duration.ofSeconds(5)));
          order.add(n);
          long t = l.token();
          Thread.sleep(100);
          l.release();
          return t;
        } catch (InterruptedException e) {
          throw new RuntimeException(e);
        }
      }));
      // Each waiter is in the server's queue before the next arrives.
      Servers.sleep(300);
    }
    assertFalse(waiters.get(0).isDone(), "waits while held");
    holder.release();
    long last = holder.token();
    for (CompletableFuture<Long> w : waiters) {
      long t = w.get(20, TimeUnit.SECONDS);
      assertTrue(t > last, t + " after " + last);
      last = t;
    }
    assertEquals(List.of(0, 1, 2), order);
  }

  @Test
  void aWaitRunsOutWithLocked() throws Exception {
    String k = key();
    try (Lease l = c.acquire(k)) {
      long t0 = System.nanoTime();
      assertThrows(LockedException.class, () -> c.acquire(k, new LeaseOptions().wait(Duration.ofMillis(700))));
      long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
      assertTrue(ms >= 600 && ms < 5000, "waited " + ms + "ms");
    }
  }

  @Test
  void autoRenewKeepsTheLeasePastItsTtl() throws Exception {
    String k = key();
    try (Lease l = c.acquire(k, new LeaseOptions().ttl(Duration.ofMillis(600)).autoRenew(true))) {
      Servers.sleep(2000);
      assertTrue(l.isValid());
      assertEquals(l.token(), c.status(k).orElseThrow().token());
    }
  }

  @Test
  void withoutRenewalTheValidityRunsOutFirst() throws Exception {
    String k = key();
    Lease l = c.acquire(k, new LeaseOptions().ttl(Duration.ofMillis(500)));
    FencerException cause = l.done().get(5, TimeUnit.SECONDS);
    assertInstanceOf(LeaseLostException.class, cause);
    assertFalse(l.isValid());
    assertThrows(LeaseLostException.class, l::extend);
  }

  @Test
  void aRevokedLeaseEndsWithItsCause() throws Exception {
    String k = key();
    Lease l = c.acquire(k, new LeaseOptions().ttl(Duration.ofMillis(900)).autoRenew(true));
    assertEquals(1L, Servers.raw(Servers.oneAddr(), "FENCE.REVOKE", k));
    FencerException cause = l.done().get(5, TimeUnit.SECONDS);
    assertInstanceOf(LeaseLostException.class, cause);
    assertTrue(cause.getMessage().contains("no longer holds"), cause.getMessage());
    assertThrows(LeaseLostException.class, l::release);
  }

  @Test
  void releaseEndsTheLeaseFirstAndIsIdempotent() throws Exception {
    String k = key();
    Lease l = c.acquire(k);
    CompletableFuture<FencerException> done = l.done();
    l.release();
    assertInstanceOf(ReleasedException.class, done.get(1, TimeUnit.SECONDS));
    l.release();
    // The owner's release is remembered: the same owner cannot take it again.
    assertThrows(LockedException.class, () -> c.tryAcquire(k, new LeaseOptions().owner(l.owner())));
  }

  @Test
  void anInterruptedWaitLeavesTheQueue() throws Exception {
    String k = key();
    Lease holder = c.acquire(k);
    Thread t = new Thread(() -> {
      try {
        c.acquire(k);
      } catch (InterruptedException e) {
        // expected
      }
    });
    t.start();
    Servers.sleep(400);
    t.interrupt();
    t.join(5000);
    assertFalse(t.isAlive());
    Servers.sleep(200);
    holder.release();
    // The interrupted waiter was not handed the lock: it is free.
    Servers.await("the lock free", Duration.ofSeconds(5), () -> c.status(k).isEmpty());
  }

  @Test
  void closingTheClientEndsItsLeases() throws Exception {
    FencerClient c2 = FencerClient.connect(Servers.oneAddr());
    Lease l = c2.acquire(key(), new LeaseOptions().autoRenew(true));
    c2.close();
    assertInstanceOf(ClosedException.class, l.done().get(1, TimeUnit.SECONDS));
    assertThrows(ClosedException.class, () -> c2.tryAcquire(key()));
  }

  @Test
  void badArgumentsAreRefusedByName() {
    InvalidArgumentException e = assertThrows(InvalidArgumentException.class,
        () -> c.tryAcquire(key(), new LeaseOptions().ttl(Duration.ofMillis(50))));
    assertEquals("ttl", e.argument());
    assertEquals("ERR", e.code());
    assertThrows(InvalidArgumentException.class, () -> c.tryAcquire(""));
    assertThrows(InvalidArgumentException.class, () -> FencerClient.connect("nohost"));
  }

  @Test
  void wrongTypeIsItsOwnError() throws Exception {
    String k = key();
    try (Lease r = c.newReadWriteLock(k, new LeaseOptions()).readLock()) {
      WrongTypeException e = assertThrows(WrongTypeException.class, () -> c.tryAcquire(k));
      assertEquals("WRONGTYPE", e.code());
    }
  }

  @Test
  void tokenForReadsTheTokenOfALockTakenWithSetNx() {
    String k = key();
    assertEquals("OK", new String((byte[]) Servers.raw(Servers.oneAddr(), "SET", k, "v1", "NX", "PX", "10000")));
    long t = c.tokenFor(k, "v1");
    assertEquals(t, c.status(k).orElseThrow().token());
    assertThrows(LeaseLostException.class, () -> c.tokenFor(k, "v2"));
  }

  @Test
  void aDeadAddressIsSkipped() throws Exception {
    int dead = Servers.freePort();
    try (FencerClient c2 = FencerClient.builder("127.0.0.1:" + dead, Servers.oneAddr()).build()) {
      try (Lease l = c2.acquire(key())) {
        assertTrue(l.token() > 0);
      }
    }
    try (FencerClient c3 = FencerClient.builder("127.0.0.1:" + dead)
        .failoverTimeout(Duration.ofMillis(500)).build()) {
      NoLeaderException e = assertThrows(NoLeaderException.class, () -> c3.tryAcquire(key()));
      assertNull(e.code());
    }
  }

  @Test
  void doneCompletesOnce() throws ExecutionException, InterruptedException {
    Lease l = c.acquire(key());
    CompletableFuture<FencerException> d = l.done();
    d.complete(new ClosedException("from outside"));
    assertTrue(l.isValid(), "completing a copy does not end the lease");
    l.release();
    assertInstanceOf(ReleasedException.class, l.done().get());
  }
}
