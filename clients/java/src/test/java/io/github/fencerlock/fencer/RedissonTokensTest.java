package io.github.fencerlock.fencer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.fencerlock.fencer.redisson.RedissonTokens;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.redisson.Redisson;
import org.redisson.api.RFencedLock;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/** tokenFor for Redisson's locks, run unchanged against a real fencerd. */
class RedissonTokensTest {
  static FencerClient fencer;
  static RedissonClient redisson;
  static RedissonTokens tokens;

  @BeforeAll
  static void start() {
    fencer = FencerClient.connect(Servers.oneAddr());
    Config cfg = new Config();
    cfg.useSingleServer().setAddress("redis://" + Servers.oneAddr()).setConnectionMinimumIdleSize(1)
        .setConnectionPoolSize(4).setSubscriptionConnectionMinimumIdleSize(1).setSubscriptionConnectionPoolSize(2);
    redisson = Redisson.create(cfg);
    tokens = new RedissonTokens(fencer, redisson);
  }

  @AfterAll
  static void stop() {
    redisson.shutdown();
    fencer.close();
  }

  @Test
  void theTokenOfTheLockTheThreadHolds() throws Exception {
    RLock lock = redisson.getLock("rl-" + UUID.randomUUID());
    lock.lock(10, TimeUnit.SECONDS);
    long t1 = tokens.tokenFor(lock);
    assertTrue(t1 > 0);
    assertEquals(t1, (long) (Long) Servers.raw(Servers.oneAddr(), "FENCE.TOKEN", lock.getName()));
    lock.lock(10, TimeUnit.SECONDS); // re-entrant: the same hash, the same token
    assertEquals(t1, tokens.tokenFor(lock));
    long me = Thread.currentThread().getId();
    // Another thread does not hold it, but may ask with the holder's ID.
    CompletableFuture<Object> other = CompletableFuture.supplyAsync(() -> {
      try {
        return tokens.tokenFor(lock);
      } catch (LeaseLostException e) {
        return e;
      }
    });
    assertTrue(other.get() instanceof LeaseLostException);
    assertEquals(t1, CompletableFuture.supplyAsync(() -> tokens.tokenFor(lock, me)).get());
    lock.unlock();
    lock.unlock();
    assertThrows(LeaseLostException.class, () -> tokens.tokenFor(lock));
    lock.lock(10, TimeUnit.SECONDS);
    assertTrue(tokens.tokenFor(lock) > t1, "a new hold has a larger token");
    lock.unlock();
  }

  @Test
  void aFencedLock() {
    RFencedLock lock = redisson.getFencedLock("rf-" + UUID.randomUUID());
    lock.lock(10, TimeUnit.SECONDS);
    long t = tokens.tokenFor(lock);
    assertEquals(t, (long) (Long) Servers.raw(Servers.oneAddr(), "FENCE.TOKEN", lock.getName()));
    lock.unlock();
  }

  @Test
  void notForReadWriteLocks() {
    RLock r = redisson.getReadWriteLock("rw-" + UUID.randomUUID()).readLock();
    r.lock(10, TimeUnit.SECONDS);
    assertThrows(InvalidArgumentException.class, () -> tokens.tokenFor(r));
    r.unlock();
  }
}
