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
   * seconds: a command is retried every 500 ms for up to 8 s.
   */
  static RedissonClient redisson(int port) {
    Config c = new Config();
    c.setLockWatchdogTimeout(WATCHDOG_MS);
    c.useSingleServer()
        .setAddress("redis://127.0.0.1:" + port)
        .setConnectTimeout(2000)
        .setTimeout(3000)
        .setRetryAttempts(16)
        .setRetryInterval(500)
        .setSubscriptionTimeout(3000)
        .setConnectionMinimumIdleSize(1)
        .setConnectionPoolSize(8)
        .setSubscriptionConnectionMinimumIdleSize(1)
        .setSubscriptionConnectionPoolSize(4)
        .setPingConnectionInterval(1000);
    return Redisson.create(c);
  }

  /** key returns a key name no other test uses. */
  static String key(String what) {
    return "jl:" + what + ":" + UUID.randomUUID();
  }
}
