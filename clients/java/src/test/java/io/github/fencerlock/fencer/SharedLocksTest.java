package io.github.fencerlock.fencer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Read-write locks and semaphores with a token per holder, sessions and elections. */
class SharedLocksTest {
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
    return "sh-" + UUID.randomUUID();
  }

  @Test
  void readersShareWithTokensOfTheirOwnAndAWriterWaits() throws Exception {
    FencedReadWriteLock rw = c.newReadWriteLock(key(), new LeaseOptions().autoRenew(true));
    Lease r1 = rw.readLock();
    Lease r2 = rw.tryReadLock();
    assertNotEquals(r1.token(), r2.token());
    assertThrows(LockedException.class, rw::tryWriteLock);
    CompletableFuture<Lease> w = CompletableFuture.supplyAsync(() -> {
      try {
        return rw.writeLock();
      } catch (InterruptedException e) {
        throw new RuntimeException(e);
      }
    });
    Thread.sleep(400);
    assertThrows(LockedException.class, rw::tryReadLock, "a reader queues behind the waiting writer");
    r1.release();
    assertFalse(w.isDone());
    r2.release();
    Lease wl = w.get(10, TimeUnit.SECONDS);
    assertTrue(wl.token() > r2.token());
    wl.downgrade();
    Lease r3 = rw.tryReadLock();
    assertThrows(InvalidArgumentException.class, r3::downgrade);
    wl.release();
    r3.release();
  }

  @Test
  void semaphorePermitsTakeTheLowestSlot() throws Exception {
    FencedSemaphore s = c.newSemaphore(key(), 2, new LeaseOptions());
    Lease a = s.acquire();
    Lease b = s.tryAcquire();
    assertEquals(0, a.slot());
    assertEquals(1, b.slot());
    assertThrows(LockedException.class, s::tryAcquire);
    a.release();
    Lease d = s.tryAcquire();
    assertEquals(0, d.slot());
    assertTrue(d.token() > b.token());
    InvalidArgumentException e = assertThrows(InvalidArgumentException.class,
        () -> c.newSemaphore(s.name(), 3, new LeaseOptions()).tryAcquire());
    assertEquals("permits", e.argument());
    b.release();
    d.release();
  }

  @Test
  void locksUnderASessionEndWithIt() throws Exception {
    Session s = c.openSession(Duration.ofSeconds(2));
    String k = key();
    Lease l = c.acquire(k, new LeaseOptions().session(s));
    Thread.sleep(2500); // kept alive by the session's keepalive
    assertTrue(l.isValid());
    assertEquals(l.token(), c.status(k).orElseThrow().token());
    s.close();
    assertTrue(l.done().get(1, TimeUnit.SECONDS) instanceof ReleasedException);
    assertTrue(c.status(k).isEmpty(), "closing the session released its locks");
  }

  @Test
  void aRevokedSessionEndsItsLeases() throws Exception {
    Session s = c.openSession(Duration.ofMillis(900));
    Lease l = c.acquire(key(), new LeaseOptions().session(s));
    Servers.raw(Servers.oneAddr(), "FENCE.SESSION", "REVOKE", Long.toString(s.id()));
    FencerException cause = l.done().get(5, TimeUnit.SECONDS);
    assertTrue(cause instanceof SessionEndedException, String.valueOf(cause));
    assertThrows(SessionEndedException.class, () -> c.tryAcquire(key(), new LeaseOptions().session(s)));
  }

  @Test
  void aLockTakenFromTheSessionEndsItsLeaseAtTheNextKeepalive() throws Exception {
    try (Session s = c.openSession(Duration.ofMillis(900))) {
      String plain = key();
      String shared = key();
      Lease l = c.acquire(plain, new LeaseOptions().session(s));
      Lease r = c.newReadWriteLock(shared, new LeaseOptions().session(s)).readLock();
      Lease kept = c.acquire(key(), new LeaseOptions().session(s));
      Servers.raw(Servers.oneAddr(), "FENCE.REVOKE", plain);
      Servers.raw(Servers.oneAddr(), "FENCE.REVOKE", shared);
      FencerException cause = l.done().get(5, TimeUnit.SECONDS);
      assertTrue(cause instanceof LeaseLostException && !(cause instanceof SessionEndedException), String.valueOf(cause));
      assertTrue(cause.getMessage().contains("taken from session"), cause.getMessage());
      assertTrue(r.done().get(5, TimeUnit.SECONDS) instanceof LeaseLostException);
      assertTrue(kept.isValid(), "a lock still held under the session keeps its lease");
      assertTrue(s.isValid());
    }
  }

  @Test
  void electionsHandLeadershipOnInArrivalOrderWithLargerEpochs() throws Exception {
    String name = key();
    Session s1 = c.openSession(Duration.ofSeconds(5));
    Session s2 = c.openSession(Duration.ofSeconds(5));
    Election e1 = c.newElection(s1, name);
    Election e2 = c.newElection(s2, name);
    long epoch1 = e1.campaign("host-a");
    assertEquals(epoch1, e1.epoch());
    assertEquals(epoch1, e1.campaign("host-a"), "campaigning while leading returns the epoch");
    CompletableFuture<Long> second = CompletableFuture.supplyAsync(() -> {
      try {
        return e2.campaign("host-b");
      } catch (InterruptedException e) {
        throw new RuntimeException(e);
      }
    });
    Thread.sleep(300);
    assertFalse(second.isDone());
    e1.proclaim("host-a:2");
    Leader ld = e1.leader().orElseThrow();
    assertEquals("host-a:2", ld.value());
    assertEquals(epoch1, ld.epoch());
    assertEquals(s1.id(), ld.session());
    assertThrows(NotElectedException.class, () -> e2.proclaim("x"));
    CompletableFuture<FencerException> ended = e1.done();
    e1.resign();
    assertTrue(ended.get(1, TimeUnit.SECONDS) instanceof ReleasedException);
    long epoch2 = second.get(10, TimeUnit.SECONDS);
    assertTrue(epoch2 > epoch1);
    assertEquals("host-b", e2.leader().orElseThrow().value());
    assertEquals(0, e1.epoch());
    s2.close();
    assertTrue(e2.leader().isEmpty());
    s1.close();
  }
}
