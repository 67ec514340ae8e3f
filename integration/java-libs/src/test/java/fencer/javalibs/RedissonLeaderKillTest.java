package fencer.javalibs;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.redisson.RedissonMultiLock;
import org.redisson.api.RCountDownLatch;
import org.redisson.api.RLock;
import org.redisson.api.RPermitExpirableSemaphore;
import org.redisson.api.RSemaphore;
import org.redisson.api.RedissonClient;

/**
 * RedissonLeaderKillTest runs {@link LeaderKill} with each Redisson API:
 * the RLock with its watchdog in `make check`, the others in the full
 * matrix (tag "full").
 */
class RedissonLeaderKillTest {

  /** Owner runs every call of one client on one thread, since Redisson's locks belong to a thread. */
  static final class Owner implements AutoCloseable {
    final RedissonClient client;
    final ExecutorService thread = Executors.newSingleThreadExecutor();

    Owner(int port) {
      this(Clients.redisson(port));
    }

    Owner(RedissonClient client) {
      this.client = client;
    }

    <T> T call(Callable<T> f) throws Exception {
      return thread.submit(f).get(60, TimeUnit.SECONDS);
    }

    @Override
    public void close() {
      thread.shutdownNow();
      client.shutdown();
    }
  }

  /** LockScenario is a lock held with lock() (the watchdog renews it) and waited for with tryLock. */
  static LeaderKill.Scenario lock(int port, java.util.function.BiFunction<RedissonClient, String, RLock> get) {
    return lock(new Owner(port), new Owner(port), get);
  }

  static LeaderKill.Scenario lock(Owner a, Owner b, java.util.function.BiFunction<RedissonClient, String, RLock> get) {
    String k = Clients.key("kill");
    return new LeaderKill.Scenario() {
      public void hold() throws Exception {
        a.call(() -> {
          get.apply(a.client, k).lock();
          return null;
        });
      }

      public boolean waitFor() throws Exception {
        return b.call(() -> {
          RLock l = get.apply(b.client, k);
          boolean ok = l.tryLock(40, 10, TimeUnit.SECONDS);
          if (ok) {
            l.unlock();
          }
          return ok;
        });
      }

      public boolean holds() throws Exception {
        return a.call(() -> get.apply(a.client, k).isHeldByCurrentThread());
      }

      public void release() throws Exception {
        a.call(() -> {
          get.apply(a.client, k).unlock();
          return null;
        });
      }

      public void close() {
        a.close();
        b.close();
      }
    };
  }

  @Test
  void rlockWatchdog() throws Exception {
    LeaderKill.run(port -> lock(port, RedissonClient::getLock));
  }

  @Test
  @Tag("full")
  void rlockWithClientNameAndResp3() throws Exception {
    LeaderKill.run(port -> {
      Owner[] o = new Owner[2];
      for (int i = 0; i < 2; i++) {
        org.redisson.config.Config c = Clients.redissonConfig(port);
        c.setProtocol(org.redisson.config.Protocol.RESP3);
        c.useSingleServer().setClientName("fencer-java-libs-" + i);
        o[i] = new Owner(org.redisson.Redisson.create(c));
      }
      return lock(o[0], o[1], RedissonClient::getLock);
    });
  }

  @Test
  @Tag("full")
  void fairLock() throws Exception {
    LeaderKill.run(port -> lock(port, RedissonClient::getFairLock));
  }

  @Test
  @Tag("full")
  void spinLock() throws Exception {
    LeaderKill.run(port -> lock(port, RedissonClient::getSpinLock));
  }

  @Test
  @Tag("full")
  void fencedLock() throws Exception {
    LeaderKill.run(port -> lock(port, RedissonClient::getFencedLock));
  }

  @Test
  @Tag("full")
  void writeLock() throws Exception {
    LeaderKill.run(port -> lock(port, (c, k) -> c.getReadWriteLock(k).writeLock()));
  }

  @Test
  @Tag("full")
  void readLockHeldWriterWaits() throws Exception {
    LeaderKill.run(port -> {
      String k = Clients.key("kill-rw");
      Owner a = new Owner(port);
      Owner b = new Owner(port);
      return new LeaderKill.Scenario() {
        public void hold() throws Exception {
          a.call(() -> {
            a.client.getReadWriteLock(k).readLock().lock();
            return null;
          });
        }

        public boolean waitFor() throws Exception {
          return b.call(() -> {
            RLock w = b.client.getReadWriteLock(k).writeLock();
            boolean ok = w.tryLock(40, 10, TimeUnit.SECONDS);
            if (ok) {
              w.unlock();
            }
            return ok;
          });
        }

        public boolean holds() throws Exception {
          return a.call(() -> a.client.getReadWriteLock(k).readLock().isHeldByCurrentThread());
        }

        public void release() throws Exception {
          a.call(() -> {
            a.client.getReadWriteLock(k).readLock().unlock();
            return null;
          });
        }

        public void close() {
          a.close();
          b.close();
        }
      };
    });
  }

  @Test
  @Tag("full")
  void multiLock() throws Exception {
    String k2 = Clients.key("kill-multi");
    LeaderKill.run(port -> lock(port, (c, k) -> new RedissonMultiLock(c.getLock(k), c.getLock(k2))));
  }

  @Test
  @Tag("full")
  void semaphore() throws Exception {
    LeaderKill.run(port -> {
      String k = Clients.key("kill-sem");
      RedissonClient a = Clients.redisson(port);
      RedissonClient b = Clients.redisson(port);
      RSemaphore sa = a.getSemaphore(k);
      return new LeaderKill.Scenario() {
        public void hold() {
          sa.trySetPermits(1);
          try {
            sa.acquire();
          } catch (InterruptedException e) {
            throw new RuntimeException(e);
          }
        }

        public boolean waitFor() throws Exception {
          boolean ok = b.getSemaphore(k).tryAcquire(40, TimeUnit.SECONDS);
          if (ok) {
            b.getSemaphore(k).release();
          }
          return ok;
        }

        public boolean holds() {
          return sa.availablePermits() == 0;
        }

        public void release() {
          sa.release();
        }

        public void close() {
          a.shutdown();
          b.shutdown();
        }
      };
    });
  }

  @Test
  @Tag("full")
  void permitExpirableSemaphore() throws Exception {
    LeaderKill.run(port -> {
      String k = Clients.key("kill-psem");
      RedissonClient a = Clients.redisson(port);
      RedissonClient b = Clients.redisson(port);
      RPermitExpirableSemaphore sa = a.getPermitExpirableSemaphore(k);
      String[] id = new String[1];
      return new LeaderKill.Scenario() {
        public void hold() throws Exception {
          sa.trySetPermits(1);
          id[0] = sa.acquire(30, TimeUnit.SECONDS);
        }

        public boolean waitFor() throws Exception {
          String got = b.getPermitExpirableSemaphore(k).tryAcquire(40, 10, TimeUnit.SECONDS);
          if (got != null) {
            b.getPermitExpirableSemaphore(k).release(got);
          }
          return got != null;
        }

        public boolean holds() {
          return sa.availablePermits() == 0;
        }

        public void release() {
          sa.release(id[0]);
        }

        public void close() {
          a.shutdown();
          b.shutdown();
        }
      };
    });
  }

  @Test
  @Tag("full")
  void countDownLatch() throws Exception {
    LeaderKill.run(port -> {
      String k = Clients.key("kill-latch");
      RedissonClient a = Clients.redisson(port);
      RedissonClient b = Clients.redisson(port);
      RCountDownLatch la = a.getCountDownLatch(k);
      return new LeaderKill.Scenario() {
        public void hold() {
          la.trySetCount(1);
        }

        public boolean waitFor() throws Exception {
          return b.getCountDownLatch(k).await(40, TimeUnit.SECONDS);
        }

        public boolean holds() {
          return la.getCount() == 1;
        }

        public void release() {
          la.countDown();
        }

        public void close() {
          a.shutdown();
          b.shutdown();
        }
      };
    });
  }
}
