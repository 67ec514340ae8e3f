package fencer.javalibs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import fencer.javalibs.Servers.Target;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.redisson.RedissonMultiLock;
import org.redisson.api.RCountDownLatch;
import org.redisson.api.RFencedLock;
import org.redisson.api.RLock;
import org.redisson.api.RPermitExpirableSemaphore;
import org.redisson.api.RReadWriteLock;
import org.redisson.api.RSemaphore;
import org.redisson.api.RedissonClient;

/**
 * RedissonTest runs Redisson's locks and synchronizers unchanged at one
 * address: a real Redis (the control), a one-node fencerd and a follower of
 * a three-node cluster. Two Redisson clients play two processes.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class RedissonTest {
  private final java.util.Map<Target, RedissonClient[]> clients = new java.util.EnumMap<>(Target.class);

  @BeforeAll
  void start() {
    for (Target t : Target.values()) {
      int port = t.port();
      clients.put(t, new RedissonClient[] {Clients.redisson(port), Clients.redisson(port)});
    }
  }

  /** start(port) gives Target.REDIS's clients the server at port (RedissonCommandsTest's own). */
  void start(int port) {
    clients.put(Target.REDIS, new RedissonClient[] {Clients.redisson(port), Clients.redisson(port)});
  }

  @AfterAll
  void stop() {
    for (RedissonClient[] cs : clients.values()) {
      for (RedissonClient c : cs) {
        c.shutdown();
      }
    }
  }

  private RedissonClient a(Target t) {
    return clients.get(t)[0];
  }

  private RedissonClient b(Target t) {
    return clients.get(t)[1];
  }

  /** other runs f in another thread (a lock is owned by a thread) and returns its result. */
  static <T> T other(java.util.concurrent.Callable<T> f) throws Exception {
    return CompletableFuture.supplyAsync(() -> {
      try {
        return f.call();
      } catch (Exception e) {
        throw new RuntimeException(e);
      }
    }).get(30, TimeUnit.SECONDS);
  }

  @ParameterizedTest
  @EnumSource(Target.class)
  void lockWatchdogKeepsTheLockPastItsTimeout(Target t) throws Exception {
    String k = Clients.key("watchdog");
    RLock la = a(t).getLock(k);
    la.lock();
    try {
      Thread.sleep(Clients.WATCHDOG_MS + 1500);
      assertTrue(la.isLocked(), "the watchdog renews the lock");
      long ttl = la.remainTimeToLive();
      assertTrue(ttl > 0 && ttl <= Clients.WATCHDOG_MS, "ttl " + ttl);
      assertFalse(other(() -> b(t).getLock(k).tryLock()), "another client is refused");
    } finally {
      la.unlock();
    }
    assertFalse(la.isLocked());
    assertTrue(other(() -> {
      RLock lb = b(t).getLock(k);
      boolean ok = lb.tryLock();
      lb.unlock();
      return ok;
    }));
  }

  @ParameterizedTest
  @EnumSource(Target.class)
  void tryLockWaitsAndIsWokenByUnlock(Target t) throws Exception {
    String k = Clients.key("trylock");
    RLock la = a(t).getLock(k);
    assertTrue(la.tryLock(0, 20, TimeUnit.SECONDS));
    CountDownLatch waiting = new CountDownLatch(1);
    CompletableFuture<Long> waited = CompletableFuture.supplyAsync(() -> {
      RLock lb = b(t).getLock(k);
      long start = System.nanoTime();
      try {
        waiting.countDown();
        boolean ok = lb.tryLock(10, 5, TimeUnit.SECONDS);
        long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        if (!ok) {
          return -1L;
        }
        lb.unlock();
        return ms;
      } catch (InterruptedException e) {
        throw new RuntimeException(e);
      }
    });
    waiting.await();
    Thread.sleep(700);
    la.unlock();
    long ms = waited.get(15, TimeUnit.SECONDS);
    assertTrue(ms >= 500, "the waiter waited (" + ms + " ms)");
    assertTrue(ms < 3000, "the unlock message woke the waiter well before the 20 s lease (" + ms + " ms)");
    // A lease runs out by itself.
    assertTrue(la.tryLock(0, 1, TimeUnit.SECONDS));
    assertTrue(other(() -> b(t).getLock(k).tryLock(5, 1, TimeUnit.SECONDS)), "taken after the 1 s lease");
  }

  @ParameterizedTest
  @EnumSource(Target.class)
  void reentrancyAndForceUnlock(Target t) throws Exception {
    String k = Clients.key("reentrant");
    RLock la = a(t).getLock(k);
    la.lock();
    la.lock();
    assertEquals(2, la.getHoldCount());
    assertTrue(la.isHeldByCurrentThread());
    la.unlock();
    assertTrue(la.isLocked());
    assertEquals(1, la.getHoldCount());
    la.unlock();
    assertFalse(la.isLocked());

    la.lock();
    assertTrue(other(() -> b(t).getLock(k).forceUnlock()), "forceUnlock of a held lock");
    assertFalse(la.isLocked());
    assertFalse(other(() -> b(t).getLock(k).forceUnlock()), "forceUnlock of a free lock");
  }

  @ParameterizedTest
  @EnumSource(Target.class)
  void fairLockGrantsInArrivalOrder(Target t) throws Exception {
    String k = Clients.key("fair");
    RLock la = a(t).getFairLock(k);
    la.lock();
    List<String> order = Collections.synchronizedList(new ArrayList<>());
    List<CompletableFuture<Void>> ws = new ArrayList<>();
    for (String name : List.of("first", "second", "third")) {
      RedissonClient c = name.equals("second") ? a(t) : b(t);
      ws.add(CompletableFuture.runAsync(() -> {
        RLock l = c.getFairLock(k);
        try {
          if (l.tryLock(20, 10, TimeUnit.SECONDS)) {
            order.add(name);
            Thread.sleep(100);
            l.unlock();
          }
        } catch (InterruptedException e) {
          throw new RuntimeException(e);
        }
      }));
      Thread.sleep(400);
    }
    la.unlock();
    CompletableFuture.allOf(ws.toArray(new CompletableFuture[0])).get(30, TimeUnit.SECONDS);
    assertEquals(List.of("first", "second", "third"), order);
  }

  @ParameterizedTest
  @EnumSource(Target.class)
  void readWriteLock(Target t) throws Exception {
    String k = Clients.key("rw");
    RReadWriteLock ra = a(t).getReadWriteLock(k);
    ra.readLock().lock();
    assertTrue(other(() -> {
      RLock r = b(t).getReadWriteLock(k).readLock();
      boolean ok = r.tryLock();
      r.unlock();
      return ok;
    }), "two readers at once");
    assertFalse(other(() -> b(t).getReadWriteLock(k).writeLock().tryLock()), "no writer while a reader holds");
    CompletableFuture<Boolean> writer = CompletableFuture.supplyAsync(() -> {
      RLock w = b(t).getReadWriteLock(k).writeLock();
      try {
        boolean ok = w.tryLock(10, 10, TimeUnit.SECONDS);
        if (ok) {
          w.unlock();
        }
        return ok;
      } catch (InterruptedException e) {
        throw new RuntimeException(e);
      }
    });
    Thread.sleep(500);
    ra.readLock().unlock();
    assertTrue(writer.get(15, TimeUnit.SECONDS), "the writer gets the lock once the reader leaves");
    RLock wa = a(t).getReadWriteLock(k).writeLock();
    wa.lock();
    assertFalse(other(() -> b(t).getReadWriteLock(k).readLock().tryLock()), "no reader while a writer holds");
    wa.unlock();
  }

  @ParameterizedTest
  @EnumSource(Target.class)
  void semaphore(Target t) throws Exception {
    String k = Clients.key("sem");
    RSemaphore sa = a(t).getSemaphore(k);
    assertTrue(sa.trySetPermits(2));
    sa.acquire(2);
    assertEquals(0, sa.availablePermits());
    assertFalse(other(() -> b(t).getSemaphore(k).tryAcquire()));
    CompletableFuture<Boolean> waiter = CompletableFuture.supplyAsync(() -> {
      try {
        return b(t).getSemaphore(k).tryAcquire(10, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        throw new RuntimeException(e);
      }
    });
    Thread.sleep(500);
    long start = System.nanoTime();
    sa.release();
    assertTrue(waiter.get(15, TimeUnit.SECONDS));
    assertTrue(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start) < 3000, "woken by the release");
    sa.release();
    assertEquals(1, sa.availablePermits());
  }

  @ParameterizedTest
  @EnumSource(Target.class)
  void permitExpirableSemaphore(Target t) throws Exception {
    String k = Clients.key("psem");
    RPermitExpirableSemaphore sa = a(t).getPermitExpirableSemaphore(k);
    assertTrue(sa.trySetPermits(1));
    String id = sa.acquire(1, TimeUnit.SECONDS);
    assertNotNull(id);
    assertNull(other(() -> b(t).getPermitExpirableSemaphore(k).tryAcquire()));
    String id2 = other(() -> b(t).getPermitExpirableSemaphore(k).tryAcquire(5, 10, TimeUnit.SECONDS));
    assertNotNull(id2, "the permit expired and passed on");
    assertFalse(sa.tryRelease(id), "the expired permit is not released again");
    b(t).getPermitExpirableSemaphore(k).release(id2);
    assertEquals(1, sa.availablePermits());
  }

  @ParameterizedTest
  @EnumSource(Target.class)
  void countDownLatch(Target t) throws Exception {
    String k = Clients.key("latch");
    RCountDownLatch la = a(t).getCountDownLatch(k);
    assertTrue(la.trySetCount(2));
    CompletableFuture<Boolean> waiter = CompletableFuture.supplyAsync(() -> {
      try {
        return b(t).getCountDownLatch(k).await(10, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        throw new RuntimeException(e);
      }
    });
    Thread.sleep(500);
    la.countDown();
    assertFalse(waiter.isDone());
    long start = System.nanoTime();
    la.countDown();
    assertTrue(waiter.get(15, TimeUnit.SECONDS));
    assertTrue(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start) < 3000, "woken by the count reaching 0");
    assertEquals(0, la.getCount());
  }

  @ParameterizedTest
  @EnumSource(Target.class)
  void fencedLockTokensIncrease(Target t) throws Exception {
    String k = Clients.key("fenced");
    RFencedLock la = a(t).getFencedLock(k);
    Long t1 = la.lockAndGetToken();
    assertNotNull(t1);
    la.unlock();
    Long t2 = other(() -> {
      RFencedLock lb = b(t).getFencedLock(k);
      Long tok = lb.tryLockAndGetToken(5, 10, TimeUnit.SECONDS);
      lb.unlock();
      return tok;
    });
    assertNotNull(t2);
    assertTrue(t2 > t1, t2 + " > " + t1);
    Long t3 = la.lockAndGetToken(1, TimeUnit.SECONDS);
    assertTrue(t3 > t2, t3 + " > " + t2);
    assertEquals(t3, la.getToken());
    la.unlock();
  }

  @ParameterizedTest
  @EnumSource(Target.class)
  void multiLock(Target t) throws Exception {
    String k1 = Clients.key("multi1");
    String k2 = Clients.key("multi2");
    RedissonMultiLock m = new RedissonMultiLock(a(t).getLock(k1), a(t).getLock(k2));
    m.lock();
    assertTrue(a(t).getLock(k1).isLocked());
    assertTrue(a(t).getLock(k2).isLocked());
    assertFalse(other(() -> b(t).getLock(k2).tryLock()));
    assertFalse(other(() -> new RedissonMultiLock(b(t).getLock(k1), b(t).getLock(k2)).tryLock(200, 5000, TimeUnit.MILLISECONDS)));
    m.unlock();
    assertTrue(other(() -> {
      RedissonMultiLock mb = new RedissonMultiLock(b(t).getLock(k1), b(t).getLock(k2));
      boolean ok = mb.tryLock(1000, 5000, TimeUnit.MILLISECONDS);
      mb.unlock();
      return ok;
    }));
  }

  @ParameterizedTest
  @EnumSource(Target.class)
  void spinLock(Target t) throws Exception {
    String k = Clients.key("spin");
    RLock la = a(t).getSpinLock(k);
    la.lock();
    la.lock();
    assertEquals(2, la.getHoldCount());
    assertFalse(other(() -> b(t).getSpinLock(k).tryLock(200, 5000, TimeUnit.MILLISECONDS)));
    CompletableFuture<Boolean> waiter = CompletableFuture.supplyAsync(() -> {
      try {
        RLock lb = b(t).getSpinLock(k);
        boolean ok = lb.tryLock(10, 5, TimeUnit.SECONDS);
        if (ok) {
          lb.unlock();
        }
        return ok;
      } catch (InterruptedException e) {
        throw new RuntimeException(e);
      }
    });
    Thread.sleep(300);
    la.unlock();
    la.unlock();
    assertTrue(waiter.get(15, TimeUnit.SECONDS));
  }
}
