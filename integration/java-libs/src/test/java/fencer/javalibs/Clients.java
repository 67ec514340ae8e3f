package fencer.javalibs;

import java.util.UUID;
import org.redisson.Redisson;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/** Clients builds the libraries' clients with the settings the tests share. */
final class Clients {
  private Clients() {}

  /** WATCHDOG_MS is Redisson's lock watchdog timeout: it renews every third of it. */
  static final long WATCHDOG_MS = 3000;

  /**
   * redisson returns a Redisson client on one address (single-server mode),
   * with a short watchdog, timeout and retry so that a leader kill costs
   * seconds: a command is retried every 500 ms for up to 8 s, and a reply is
   * awaited for 6 s: longer than fencer takes to elect a new leader and
   * forward the command to it (a follower holds a command until then).
   * pingConnectionInterval keeps Redisson's default (30 s): Redisson closes
   * a connection whose PING is not answered within that interval, and with
   * it the command in flight on it, so an interval shorter than an election
   * turns a slow reply into a lost one (a PING queued behind a command
   * forwarded during the election is answered after it, as Redis would).
   */
  static RedissonClient redisson(int port) {
    return Redisson.create(redissonConfig(port));
  }

  /** redissonConfig is {@link #redisson}'s configuration, for a test to change before it creates the client. */
  static Config redissonConfig(int port) {
    Config c = new Config();
    c.setLockWatchdogTimeout(WATCHDOG_MS);
    c.useSingleServer()
        .setAddress("redis://127.0.0.1:" + port)
        .setConnectTimeout(2000)
        .setTimeout(6000)
        .setRetryAttempts(16)
        .setRetryInterval(500)
        .setSubscriptionTimeout(3000)
        .setConnectionMinimumIdleSize(1)
        .setConnectionPoolSize(8)
        .setSubscriptionConnectionMinimumIdleSize(1)
        .setSubscriptionConnectionPoolSize(4);
    return c;
  }

  /** lettuceFactory returns Spring Data Redis's Lettuce connection factory on one address, started. */
  static org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory lettuceFactory(int port) {
    var f = new org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory(
        new org.springframework.data.redis.connection.RedisStandaloneConfiguration("127.0.0.1", port),
        org.springframework.data.redis.connection.lettuce.LettuceClientConfiguration.builder()
            .commandTimeout(java.time.Duration.ofSeconds(10)).build());
    f.afterPropertiesSet();
    f.start();
    return f;
  }

  /** key returns a key name no other test uses. */
  static String key(String what) {
    return "jl:" + what + ":" + UUID.randomUUID();
  }
}
