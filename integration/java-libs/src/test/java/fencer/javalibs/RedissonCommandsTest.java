package fencer.javalibs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import fencer.javalibs.Servers.Target;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.redisson.Redisson;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;
import org.redisson.config.Protocol;
import redis.clients.jedis.Jedis;

/**
 * RedissonCommandsTest finds out what Redisson sends: every API of
 * RedissonTest runs against a fresh redis-server, whose INFO commandstats
 * then lists each command Redisson sent (directly or from its scripts), and
 * fencer must know every one of them (COMMAND INFO). It also runs a lock
 * with the connection options users set that change what Redisson sends at
 * connect: a client name (CLIENT SETNAME) and RESP3 (HELLO 3).
 */
class RedissonCommandsTest {

  @Test
  void fencerKnowsEveryCommandRedissonSends() throws Exception {
    Servers.Proc redis = Servers.startRedis();
    RedissonTest t = new RedissonTest();
    List<String> sent = new ArrayList<>();
    try {
      t.start(redis.port);
      t.lockWatchdogKeepsTheLockPastItsTimeout(Target.REDIS);
      t.tryLockWaitsAndIsWokenByUnlock(Target.REDIS);
      t.reentrancyAndForceUnlock(Target.REDIS);
      t.fairLockGrantsInArrivalOrder(Target.REDIS);
      t.readWriteLock(Target.REDIS);
      t.semaphore(Target.REDIS);
      t.permitExpirableSemaphore(Target.REDIS);
      t.countDownLatch(Target.REDIS);
      t.fencedLockTokensIncrease(Target.REDIS);
      t.multiLock(Target.REDIS);
      t.spinLock(Target.REDIS);
      try (Jedis j = new Jedis("127.0.0.1", redis.port)) {
        for (String line : j.info("commandstats").split("\r?\n")) {
          if (line.startsWith("cmdstat_")) {
            sent.add(line.substring("cmdstat_".length(), line.indexOf(':')));
          }
        }
      }
    } finally {
      t.stop();
      redis.kill();
    }
    sent.remove("info");
    System.out.println("Redisson sent: " + new TreeSet<>(sent));
    assertTrue(sent.contains("evalsha") && sent.contains("subscribe"), "the probe saw Redisson's traffic: " + sent);
    try (Jedis f = new Jedis("127.0.0.1", Target.FENCER.port())) {
      List<String> unknown = new ArrayList<>();
      for (String c : sent) {
        String name = c.replace('|', ' ');
        String[] words = name.split(" ");
        Object info = f.sendCommand(() -> "COMMAND".getBytes(), "INFO", words[0]);
        if (!(info instanceof List) || ((List<?>) info).isEmpty() || ((List<?>) info).get(0) == null) {
          unknown.add(c);
        }
      }
      assertEquals(List.of(), unknown, "commands Redisson sent that fencer does not know");
    }
  }

  @ParameterizedTest
  @EnumSource(Target.class)
  void clientNameAndResp3(Target t) throws Exception {
    List<RedissonClient> cs = new ArrayList<>();
    for (int i = 0; i < 2; i++) {
      Config c = new Config();
      c.setLockWatchdogTimeout(Clients.WATCHDOG_MS);
      c.setProtocol(Protocol.RESP3);
      c.useSingleServer().setAddress("redis://127.0.0.1:" + t.port()).setClientName("fencer-java-libs-" + i)
          .setTimeout(6000).setConnectionMinimumIdleSize(1).setSubscriptionConnectionMinimumIdleSize(1);
      cs.add(Redisson.create(c));
    }
    try {
      String k = Clients.key("resp3");
      RLock la = cs.get(0).getLock(k);
      la.lock();
      assertFalse(RedissonTest.other(() -> cs.get(1).getLock(k).tryLock()));
      CompletableFuture<Boolean> waiter = LeaderKill.async(() -> {
        RLock lb = cs.get(1).getLock(k);
        boolean ok = lb.tryLock(10, 5, TimeUnit.SECONDS);
        if (ok) {
          lb.unlock();
        }
        return ok;
      });
      Thread.sleep(300);
      la.unlock();
      assertTrue(waiter.get(5, TimeUnit.SECONDS), "woken by the unlock message (a RESP3 push)");
    } finally {
      for (RedissonClient c : cs) {
        c.shutdown();
      }
    }
  }
}
