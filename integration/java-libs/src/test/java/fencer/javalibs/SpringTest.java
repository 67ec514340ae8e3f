package fencer.javalibs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import fencer.javalibs.Servers.Target;
import java.time.Duration;
import java.time.Instant;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Lock;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.SimpleLock;
import net.javacrumbs.shedlock.provider.redis.spring.RedisLockProvider;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.MethodSource;
import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;
import org.springframework.integration.redis.util.RedisLockRegistry;
import org.springframework.integration.redis.util.RedisLockRegistry.RedisLockType;

/**
 * SpringTest runs Spring Integration's RedisLockRegistry (pub/sub and spin
 * modes) and ShedLock's Spring Data Redis provider, on Spring Data Redis
 * with Lettuce, unchanged at each target, and across a leader kill.
 */
class SpringTest {

  static java.util.stream.Stream<Arguments> registries() {
    java.util.List<Arguments> out = new java.util.ArrayList<>();
    for (Target t : Target.values()) {
      for (RedisLockType type : RedisLockType.values()) {
        out.add(Arguments.of(t, type));
      }
    }
    return out.stream();
  }

  static RedisLockRegistry registry(LettuceConnectionFactory f, String name, RedisLockType type, long expireMs) {
    RedisLockRegistry r = new RedisLockRegistry(f, name, expireMs);
    r.setRedisLockType(type);
    return r;
  }

  @ParameterizedTest
  @MethodSource("registries")
  void lockRegistry(Target t, RedisLockType type) throws Exception {
    LettuceConnectionFactory fa = Clients.lettuceFactory(t.port());
    LettuceConnectionFactory fb = Clients.lettuceFactory(t.port());
    String name = Clients.key("registry");
    RedisLockRegistry ra = registry(fa, name, type, 2000);
    RedisLockRegistry rb = registry(fb, name, type, 2000);
    try {
      Lock la = ra.obtain("job");
      la.lock();
      assertFalse(LeaderKill.async(() -> rb.obtain("job").tryLock()).get(10, TimeUnit.SECONDS),
          "another registry is refused");
      CompletableFuture<Long> waiter = LeaderKill.async(() -> {
        Lock lb = rb.obtain("job");
        long start = System.nanoTime();
        boolean ok = lb.tryLock(10, TimeUnit.SECONDS);
        long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        if (ok) {
          lb.unlock();
        }
        return ok ? ms : -1;
      });
      Thread.sleep(500);
      la.unlock();
      long ms = waiter.get(15, TimeUnit.SECONDS);
      assertTrue(ms >= 0 && ms < 1500, "the waiter got the lock soon after the unlock (" + ms + " ms)");
      // A lock left held runs out after expireAfter (2 s).
      la.lock();
      Thread.sleep(2500);
      assertTrue(LeaderKill.async(() -> {
        Lock lb = rb.obtain("job");
        boolean ok = lb.tryLock(5, TimeUnit.SECONDS);
        if (ok) {
          lb.unlock();
        }
        return ok;
      }).get(10, TimeUnit.SECONDS), "taken after expireAfter");
      // Re-entry within one registry.
      Lock lb = rb.obtain("job2");
      lb.lock();
      lb.lock();
      lb.unlock();
      assertFalse(LeaderKill.async(() -> ra.obtain("job2").tryLock()).get(10, TimeUnit.SECONDS));
      lb.unlock();
    } finally {
      ra.destroy();
      rb.destroy();
      fa.destroy();
      fb.destroy();
    }
  }

  static LockConfiguration job(String name, Duration atMost, Duration atLeast) {
    return new LockConfiguration(Instant.now(), name, atMost, atLeast);
  }

  @ParameterizedTest
  @EnumSource(Target.class)
  void shedLockSpringDataRedis(Target t) throws Exception {
    LettuceConnectionFactory fa = Clients.lettuceFactory(t.port());
    LettuceConnectionFactory fb = Clients.lettuceFactory(t.port());
    String env = Clients.key("shedlock");
    RedisLockProvider pa = new RedisLockProvider(fa, env);
    RedisLockProvider pb = new RedisLockProvider(fb, env);
    try {
      Optional<SimpleLock> a = pa.lock(job("report", Duration.ofSeconds(10), Duration.ZERO));
      assertTrue(a.isPresent());
      assertTrue(pb.lock(job("report", Duration.ofSeconds(10), Duration.ZERO)).isEmpty(), "a second node is refused");
      Optional<SimpleLock> ext = a.get().extend(Duration.ofSeconds(20), Duration.ZERO);
      assertTrue(ext.isPresent(), "extend of a held lock");
      ext.get().unlock();
      Optional<SimpleLock> b = pb.lock(job("report", Duration.ofSeconds(1), Duration.ZERO));
      assertTrue(b.isPresent(), "free after unlock");
      Thread.sleep(1500);
      Optional<SimpleLock> c = pa.lock(job("report", Duration.ofSeconds(10), Duration.ofSeconds(1)));
      assertTrue(c.isPresent(), "free after lockAtMostFor");
      c.get().unlock();
      assertTrue(pb.lock(job("report", Duration.ofSeconds(10), Duration.ZERO)).isEmpty(),
          "lockAtLeastFor keeps it after unlock");
    } finally {
      fa.destroy();
      fb.destroy();
    }
  }

  /** registryScenario is LeaderKill's part for RedisLockRegistry of type. */
  static LeaderKill.Scenario registryScenario(int port, RedisLockType type) {
    LettuceConnectionFactory fa = Clients.lettuceFactory(port);
    LettuceConnectionFactory fb = Clients.lettuceFactory(port);
    String name = Clients.key("kill-registry");
    RedisLockRegistry ra = registry(fa, name, type, 15000);
    RedisLockRegistry rb = registry(fb, name, type, 15000);
    java.util.concurrent.ExecutorService holder = java.util.concurrent.Executors.newSingleThreadExecutor();
    Lock la = ra.obtain("job");
    return new LeaderKill.Scenario() {
      public void hold() throws Exception {
        holder.submit(() -> la.lock()).get();
      }

      public boolean waitFor() throws Exception {
        Lock lb = rb.obtain("job");
        boolean ok = lb.tryLock(40, TimeUnit.SECONDS);
        if (ok) {
          lb.unlock();
        }
        return ok;
      }

      public boolean holds() throws Exception {
        try (var c = fa.getConnection()) {
          return Boolean.TRUE.equals(c.keyCommands().exists((name + ":job").getBytes()));
        }
      }

      public void release() throws Exception {
        holder.submit(la::unlock).get();
      }

      public void close() {
        holder.shutdownNow();
        ra.destroy();
        rb.destroy();
        fa.destroy();
        fb.destroy();
      }
    };
  }

  @Test
  void registryPubSubAcrossLeaderKill() throws Exception {
    LeaderKill.run(port -> registryScenario(port, RedisLockType.PUB_SUB_LOCK));
  }

  @Test
  @Tag("full")
  void registrySpinAcrossLeaderKill() throws Exception {
    LeaderKill.run(port -> registryScenario(port, RedisLockType.SPIN_LOCK));
  }

  @Test
  void shedLockAcrossLeaderKill() throws Exception {
    LeaderKill.run(port -> {
      LettuceConnectionFactory fa = Clients.lettuceFactory(port);
      LettuceConnectionFactory fb = Clients.lettuceFactory(port);
      String env = Clients.key("kill-shedlock");
      RedisLockProvider pa = new RedisLockProvider(fa, env);
      RedisLockProvider pb = new RedisLockProvider(fb, env);
      SimpleLock[] held = new SimpleLock[1];
      return new LeaderKill.Scenario() {
        public void hold() {
          held[0] = pa.lock(job("report", Duration.ofSeconds(20), Duration.ZERO)).orElseThrow();
        }

        public boolean waitFor() throws Exception {
          long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(40);
          while (System.nanoTime() < end) {
            try {
              Optional<SimpleLock> l = pb.lock(job("report", Duration.ofSeconds(20), Duration.ZERO));
              if (l.isPresent()) {
                l.get().unlock();
                return true;
              }
            } catch (RuntimeException e) {
              // A scheduler tries again at its next tick; so does this loop.
            }
            Thread.sleep(200);
          }
          return false;
        }

        public boolean holds() {
          Optional<SimpleLock> ext = held[0].extend(Duration.ofSeconds(20), Duration.ZERO);
          ext.ifPresent(l -> held[0] = l);
          return ext.isPresent();
        }

        public void release() {
          held[0].unlock();
        }

        public void close() {
          fa.destroy();
          fb.destroy();
        }
      };
    });
  }
}
