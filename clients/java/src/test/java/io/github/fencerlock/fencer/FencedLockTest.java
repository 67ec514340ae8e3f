package io.github.fencerlock.fencer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** FencedLock's java.util.concurrent.locks.Lock contract, Hazelcast's shape, on a real fencerd. */
class FencedLockTest {
  static FencerClient c;

  @BeforeAll
  static void start() {
    c = FencerClient.connect(Servers.oneAddr());
  }

  @AfterAll
  static void stop() {
    c.close();
  }

  static FencedLock lock() {
    return c.newFencedLock("fl-" + UUID.randomUUID(), new LeaseOptions().ttl(Duration.ofSeconds(2)));
  }

  static <T> T on(Thread t, java.util.concurrent.Callable<T> f) throws Exception {
    AtomicReference<Object> out = new AtomicReference<>();
    Thread th = new Thread(() -> {
      try {
        out.set(f.call());
      } catch (Throwable e) {
        out.set(e);
      }
    });
    th.start();
    th.join(20000);
    if (out.get() instanceof Exception) {
      throw (Exception) out.get();
    }
    @SuppressWarnings("unchecked")
    T v = (T) out.get();
    return v;
  }

  @Test
  void reentrantByItsThreadWithTheSameFence() throws Exception {
    FencedLock l = lock();
    long f = l.lockAndGetFence();
    assertTrue(f > 0);
    assertEquals(f, l.lockAndGetFence());
    assertTrue(l.tryLock());
    assertEquals(3, l.getLockCount());
    assertEquals(f, l.getFence());
    assertTrue(l.isLocked());
    assertTrue(l.isLockedByCurrentThread());
    l.unlock();
    l.unlock();
    assertTrue(l.isLocked(), "still held once");
    l.unlock();
    assertFalse(l.isLocked());
    assertThrows(IllegalMonitorStateException.class, l::unlock);
    assertThrows(IllegalMonitorStateException.class, l::getFence);
    long g = l.lockAndGetFence();
    assertTrue(g > f, "a new hold has a larger fence");
    l.unlock();
  }

  @Test
  void anotherThreadCannotUnlockAndWaitsForIt() throws Exception {
    FencedLock l = lock();
    long f = l.lockAndGetFence();
    assertThrows(IllegalMonitorStateException.class, () -> on(null, () -> {
      l.unlock();
      return null;
    }));
    assertEquals(FencedLock.INVALID_FENCE, (long) on(null, l::tryLockAndGetFence));
    assertEquals(FencedLock.INVALID_FENCE, (long) on(null, () -> l.tryLockAndGetFence(300, TimeUnit.MILLISECONDS)));
    CompletableFuture<Long> other = new CompletableFuture<>();
    Thread t = new Thread(() -> {
      long g = l.lockAndGetFence(); // lock() blocks until granted
      other.complete(g);
      l.unlock();
    });
    t.start();
    Thread.sleep(500);
    assertFalse(other.isDone(), "lock() blocks while another thread holds it");
    l.unlock();
    long g = other.get(10, TimeUnit.SECONDS);
    assertTrue(g > f);
    t.join(5000);
  }

  @Test
  void aLostLeaseMakesUnlockAndGetFenceThrow() throws Exception {
    FencedLock l = lock();
    l.lock();
    Lease lease = l.lease();
    Servers.raw(Servers.oneAddr(), "FENCE.REVOKE", l.getName());
    lease.done().get(5, TimeUnit.SECONDS);
    assertFalse(l.isLockedByCurrentThread());
    assertThrows(LeaseLostException.class, l::getFence);
    assertThrows(IllegalMonitorStateException.class, l::unlock, "the lost hold is dropped");
    l.lock();
    l.lock();
    Servers.raw(Servers.oneAddr(), "FENCE.REVOKE", l.getName());
    l.lease().done().get(5, TimeUnit.SECONDS);
    assertThrows(LeaseLostException.class, l::unlock);
  }

  @Test
  void leasesAreRenewedWhileHeld() throws Exception {
    FencedLock l = lock(); // 2s TTL
    long f = l.lockAndGetFence();
    Thread.sleep(3000);
    assertEquals(f, l.getFence());
    assertEquals(f, c.status(l.getName()).orElseThrow().token());
    l.unlock();
  }

  @Test
  void lockInterruptiblyStopsWhenInterrupted() throws Exception {
    FencedLock l = lock();
    l.lock();
    AtomicReference<Throwable> got = new AtomicReference<>();
    Thread t = new Thread(() -> {
      try {
        l.lockInterruptibly();
      } catch (Throwable e) {
        got.set(e);
      }
    });
    t.start();
    Thread.sleep(300);
    t.interrupt();
    t.join(5000);
    assertTrue(got.get() instanceof InterruptedException, String.valueOf(got.get()));
    // lock() keeps the interrupt for the caller and still takes the lock.
    CompletableFuture<Boolean> kept = new CompletableFuture<>();
    Thread u = new Thread(() -> {
      Thread.currentThread().interrupt();
      l.lock();
      kept.complete(Thread.currentThread().isInterrupted());
      l.unlock();
    });
    u.start();
    Thread.sleep(300);
    l.unlock();
    assertTrue(kept.get(10, TimeUnit.SECONDS));
  }

  @Test
  void conditionsAreNotSupported() {
    assertThrows(UnsupportedOperationException.class, () -> lock().newCondition());
  }
}
