package fencer.javalibs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import fencer.javalibs.Servers.Target;
import io.lettuce.core.RedisURI;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.SetArgs;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.RedisClient;
import redis.clients.jedis.params.SetParams;

/**
 * PlainTest is the lock hand-written services keep: SET key token NX PX
 * to take it, and the compare-and-delete script of Redis's
 * distributed-lock page to release it, on plain Jedis and plain Lettuce.
 */
class PlainTest {
  /** RELEASE is the compare-and-delete of Redis's distributed-lock page. */
  static final String RELEASE =
      "if redis.call(\"get\",KEYS[1]) == ARGV[1] then\n    return redis.call(\"del\",KEYS[1])\nelse\n    return 0\nend";

  /** PlainLock is one client's SET NX PX lock. */
  interface PlainLock extends AutoCloseable {
    /** tryLock takes key for ms with token; false if someone holds it. */
    boolean tryLock(String key, String token, long ms);

    /** unlock deletes key if token holds it; false if not. */
    boolean unlock(String key, String token);

    /** value returns the key's value. */
    String value(String key);

    @Override
    void close();
  }

  static PlainLock jedis(int port) {
    RedisClient j = RedisClient.builder().hostAndPort(new HostAndPort("127.0.0.1", port))
        .clientConfig(DefaultJedisClientConfig.builder().socketTimeoutMillis(10000).build()).build();
    return new PlainLock() {
      public boolean tryLock(String key, String token, long ms) {
        return "OK".equals(j.set(key, token, SetParams.setParams().nx().px(ms)));
      }

      public boolean unlock(String key, String token) {
        return Long.valueOf(1).equals(j.eval(RELEASE, List.of(key), List.of(token)));
      }

      public String value(String key) {
        return j.get(key);
      }

      public void close() {
        j.close();
      }
    };
  }

  static PlainLock lettuce(int port) {
    io.lettuce.core.RedisClient client = io.lettuce.core.RedisClient.create(RedisURI.builder().withHost("127.0.0.1").withPort(port)
        .withTimeout(Duration.ofSeconds(10)).build());
    StatefulRedisConnection<String, String> conn = client.connect();
    RedisCommands<String, String> c = conn.sync();
    return new PlainLock() {
      public boolean tryLock(String key, String token, long ms) {
        return "OK".equals(c.set(key, token, SetArgs.Builder.nx().px(ms)));
      }

      public boolean unlock(String key, String token) {
        Long n = c.eval(RELEASE, ScriptOutputType.INTEGER, new String[] {key}, token);
        return n != null && n == 1;
      }

      public String value(String key) {
        return c.get(key);
      }

      public void close() {
        conn.close();
        client.shutdown();
      }
    };
  }

  static void exercise(PlainLock a, PlainLock b) throws Exception {
    String k = Clients.key("plain");
    String ta = UUID.randomUUID().toString();
    String tb = UUID.randomUUID().toString();
    assertTrue(a.tryLock(k, ta, 10000));
    assertTrue(!b.tryLock(k, tb, 10000), "held by another token");
    assertTrue(!a.tryLock(k, ta, 10000), "SET NX refuses the holder's own token too, as Redis does");
    assertTrue(!b.unlock(k, tb), "another token does not release it");
    assertEquals(ta, a.value(k));
    assertTrue(a.unlock(k, ta));
    assertNull(a.value(k));
    assertTrue(b.tryLock(k, tb, 500));
    Thread.sleep(800);
    assertTrue(a.tryLock(k, ta, 10000), "free once the lease ran out");
    assertTrue(!b.unlock(k, tb), "the expired holder's release does not delete the new holder's lock");
    assertTrue(a.unlock(k, ta));
  }

  @ParameterizedTest
  @EnumSource(Target.class)
  void jedisSetNxPx(Target t) throws Exception {
    try (PlainLock a = jedis(t.port()); PlainLock b = jedis(t.port())) {
      exercise(a, b);
    }
  }

  @ParameterizedTest
  @EnumSource(Target.class)
  void lettuceSetNxPx(Target t) throws Exception {
    try (PlainLock a = lettuce(t.port()); PlainLock b = lettuce(t.port())) {
      exercise(a, b);
    }
  }

  /** scenario is LeaderKill's part for a plain lock: the waiter retries every 100 ms, as such services do. */
  static LeaderKill.Scenario scenario(PlainLock a, PlainLock b) {
    String k = Clients.key("kill-plain");
    String ta = UUID.randomUUID().toString();
    String tb = UUID.randomUUID().toString();
    return new LeaderKill.Scenario() {
      public void hold() {
        assertTrue(a.tryLock(k, ta, 20000));
      }

      public boolean waitFor() throws Exception {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(40);
        while (System.nanoTime() < end) {
          try {
            if (b.tryLock(k, tb, 20000)) {
              return b.unlock(k, tb);
            }
          } catch (RuntimeException e) {
            // A timeout or an UNCERTAIN during the election: try again.
          }
          Thread.sleep(100);
        }
        return false;
      }

      public boolean holds() {
        return ta.equals(a.value(k));
      }

      public void release() {
        assertTrue(a.unlock(k, ta));
      }

      public void close() {
        a.close();
        b.close();
      }
    };
  }

  @Test
  void jedisAcrossLeaderKill() throws Exception {
    LeaderKill.run(port -> scenario(jedis(port), jedis(port)));
  }

  @Test
  @Tag("full")
  void lettuceAcrossLeaderKill() throws Exception {
    LeaderKill.run(port -> scenario(lettuce(port), lettuce(port)));
  }
}
