package fencer.javalibs;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Lock;
import org.junit.jupiter.api.Test;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;
import org.springframework.integration.redis.util.RedisLockRegistry;
import org.springframework.integration.redis.util.RedisLockRegistry.RedisLockType;

/**
 * CrossNodeTest: the holder and the waiter connected to different nodes of
 * the three-node cluster (each pair of nodes, leader included); the unlock
 * message published where the unlock ran must wake the waiter on its own
 * node, long before the lock's lease would have run out.
 */
class CrossNodeTest {

  static List<int[]> pairs() {
    List<Servers.Proc> nodes = Servers.three().nodes;
    List<int[]> out = new ArrayList<>();
    for (Servers.Proc a : nodes) {
      for (Servers.Proc b : nodes) {
        if (a != b) {
          out.add(new int[] {a.port, b.port});
        }
      }
    }
    return out;
  }

  @Test
  void redissonWaiterOnAnotherNodeIsWoken() throws Exception {
    for (int[] p : pairs()) {
      RedissonClient a = Clients.redisson(p[0]);
      RedissonClient b = Clients.redisson(p[1]);
      try {
        String k = Clients.key("cross");
        RLock la = a.getLock(k);
        la.lock(30, TimeUnit.SECONDS);
        CompletableFuture<Long> waiter = LeaderKill.async(() -> {
          RLock lb = b.getLock(k);
          long start = System.nanoTime();
          boolean ok = lb.tryLock(10, 5, TimeUnit.SECONDS);
          if (ok) {
            lb.unlock();
          }
          return ok ? TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start) : -1;
        });
        Thread.sleep(500);
        la.unlock();
        long ms = waiter.get(15, TimeUnit.SECONDS);
        assertTrue(ms >= 0 && ms < 2500, "holder on " + p[0] + ", waiter on " + p[1] + ": " + ms + " ms");
      } finally {
        a.shutdown();
        b.shutdown();
      }
    }
  }

  @Test
  void springPubSubWaiterOnAnotherNodeIsWoken() throws Exception {
    for (int[] p : pairs()) {
      LettuceConnectionFactory fa = Clients.lettuceFactory(p[0]);
      LettuceConnectionFactory fb = Clients.lettuceFactory(p[1]);
      String name = Clients.key("cross-registry");
      RedisLockRegistry ra = SpringTest.registry(fa, name, RedisLockType.PUB_SUB_LOCK, 30000);
      RedisLockRegistry rb = SpringTest.registry(fb, name, RedisLockType.PUB_SUB_LOCK, 30000);
      try {
        Lock la = ra.obtain("job");
        la.lock();
        CompletableFuture<Long> waiter = LeaderKill.async(() -> {
          Lock lb = rb.obtain("job");
          long start = System.nanoTime();
          boolean ok = lb.tryLock(10, TimeUnit.SECONDS);
          if (ok) {
            lb.unlock();
          }
          return ok ? TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start) : -1;
        });
        Thread.sleep(500);
        la.unlock();
        long ms = waiter.get(15, TimeUnit.SECONDS);
        assertTrue(ms >= 0 && ms < 2500, "holder on " + p[0] + ", waiter on " + p[1] + ": " + ms + " ms");
      } finally {
        ra.destroy();
        rb.destroy();
        fa.destroy();
        fb.destroy();
      }
    }
  }
}
