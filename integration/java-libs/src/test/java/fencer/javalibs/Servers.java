package fencer.javalibs;

import java.io.File;
import java.io.IOException;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Supplier;
import redis.clients.jedis.Jedis;

/**
 * Servers starts the processes the tests talk to: a real redis-server (the
 * control), a one-node fencerd and a three-node fencerd cluster started
 * without --redlock-multi-endpoint, each once per test run and stopped when
 * the JVM exits (and by {@link #close}). A leader-kill test starts a
 * cluster of its own with {@link #newCluster}.
 */
final class Servers {
  private Servers() {}

  private static final List<Proc> started = new ArrayList<>();
  private static final Map<String, Object> shared = new ConcurrentHashMap<>();
  private static Path workDir;

  static {
    Runtime.getRuntime().addShutdownHook(new Thread(Servers::close));
  }

  /** Target is one address a library is given. */
  enum Target {
    /** a real redis-server: the control. */
    REDIS,
    /** a one-node fencerd. */
    FENCER,
    /** a follower of a three-node fencerd cluster. */
    FOLLOWER;

    /** port of this target's address, its server started on first use. */
    int port() {
      switch (this) {
        case REDIS:
          return ((Proc) shared.computeIfAbsent("redis", k -> startRedis())).port;
        case FENCER:
          return ((Cluster) shared.computeIfAbsent("one", k -> newCluster(1))).nodes.get(0).port;
        default:
          Cluster c = (Cluster) shared.computeIfAbsent("three", k -> newCluster(3));
          return c.follower().port;
      }
    }
  }

  /** three returns the shared three-node cluster (FOLLOWER's), started on first use. */
  static Cluster three() {
    Target.FOLLOWER.port();
    return (Cluster) shared.get("three");
  }

  static synchronized Path workDir() {
    if (workDir == null) {
      try {
        workDir = Files.createTempDirectory("fencer-java-libs");
      } catch (IOException e) {
        throw new RuntimeException(e);
      }
    }
    return workDir;
  }

  static int freePort() {
    try (ServerSocket s = new ServerSocket(0)) {
      return s.getLocalPort();
    } catch (IOException e) {
      throw new RuntimeException(e);
    }
  }

  static String fencerd() {
    String p = System.getProperty("fencerd");
    if (p == null || p.isEmpty() || p.startsWith("$")) {
      p = System.getenv("FENCERD");
    }
    if (p == null || p.isEmpty()) {
      p = new File("../../bin/fencerd").getAbsolutePath();
    }
    if (!new File(p).canExecute()) {
      throw new IllegalStateException("no fencerd at " + p + ": build it (make build) or set FENCERD");
    }
    return p;
  }

  /** Proc is one started process listening on port. */
  static final class Proc {
    final String name;
    final int port;
    final List<String> cmd;
    final Path log;
    Process process;

    Proc(String name, int port, List<String> cmd) {
      this.name = name;
      this.port = port;
      this.cmd = cmd;
      this.log = workDir().resolve(name + ".log");
    }

    void start() {
      try {
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
        pb.redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile()));
        process = pb.start();
      } catch (IOException e) {
        throw new RuntimeException(e);
      }
      synchronized (started) {
        started.add(this);
      }
    }

    /** kill stops the process with SIGKILL and waits for it. */
    void kill() {
      if (process != null && process.isAlive()) {
        process.destroyForcibly();
        try {
          process.waitFor();
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }
    }

    String addr() {
      return "127.0.0.1:" + port;
    }
  }

  static Proc startRedis() {
    int port = freePort();
    Proc p = new Proc("redis-" + port, port, List.of("redis-server", "--port", String.valueOf(port),
        "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"));
    p.start();
    await("redis-server on " + port, Duration.ofSeconds(10), () -> ping(port));
    return p;
  }

  /** Cluster is a fencerd cluster of real processes. */
  static final class Cluster {
    final List<Proc> nodes = new ArrayList<>();

    /** info returns the value of field in node's INFO, or null. */
    static String info(Proc node, String field) {
      try (Jedis j = new Jedis("127.0.0.1", node.port, 2000)) {
        for (String line : j.info().split("\r?\n")) {
          if (line.startsWith(field + ":")) {
            return line.substring(field.length() + 1).trim();
          }
        }
      } catch (RuntimeException e) {
        return null;
      }
      return null;
    }

    Proc leader() {
      for (Proc n : nodes) {
        if (n.process.isAlive() && "leader".equals(info(n, "fencer_role"))) {
          return n;
        }
      }
      throw new IllegalStateException("no leader");
    }

    Proc follower() {
      for (Proc n : nodes) {
        if (n.process.isAlive() && "follower".equals(info(n, "fencer_role"))) {
          return n;
        }
      }
      throw new IllegalStateException("no follower");
    }

    /** awaitLeader waits until a live node other than gone leads, and returns it. */
    Proc awaitLeader(Proc gone, Duration within) {
      Proc[] got = new Proc[1];
      await("a new leader", within, () -> {
        for (Proc n : nodes) {
          if (n != gone && n.process.isAlive() && "leader".equals(info(n, "fencer_role"))) {
            got[0] = n;
            return true;
          }
        }
        return false;
      });
      return got[0];
    }

    void stop() {
      for (Proc n : nodes) {
        n.kill();
      }
    }
  }

  /** newCluster starts an n-node fencerd cluster and waits until every node knows its leader. */
  static Cluster newCluster(int n) {
    Cluster c = new Cluster();
    String first = null;
    for (int i = 0; i < n; i++) {
      int port = freePort();
      int raft = freePort();
      String name = "fencerd-" + port;
      List<String> cmd = new ArrayList<>(List.of(fencerd(), "--data-dir", workDir().resolve(name).toString(),
          "--listen", "127.0.0.1:" + port, "--raft-listen", "127.0.0.1:" + raft, "--http-listen", "off"));
      if (first != null) {
        cmd.add("--join");
        cmd.add(first);
      }
      Proc p = new Proc(name, port, cmd);
      p.start();
      c.nodes.add(p);
      if (first == null) {
        first = p.addr();
        await("fencerd on " + port + " to lead", Duration.ofSeconds(15),
            () -> "leader".equals(Cluster.info(p, "fencer_role")));
      }
    }
    for (Proc p : c.nodes) {
      await("fencerd on " + p.port + " to know its leader", Duration.ofSeconds(20), () -> {
        String l = Cluster.info(p, "fencer_leader");
        return l != null && !l.isEmpty();
      });
    }
    if (n > 1) {
      await("every node a member", Duration.ofSeconds(20), () -> {
        try (Jedis j = new Jedis("127.0.0.1", c.nodes.get(0).port, 2000)) {
          Object v = j.sendCommand(() -> "FENCE.MEMBERS".getBytes());
          return v instanceof List && ((List<?>) v).size() == n;
        } catch (RuntimeException e) {
          return false;
        }
      });
    }
    return c;
  }

  static boolean ping(int port) {
    try (Jedis j = new Jedis("127.0.0.1", port, 1000)) {
      return "PONG".equals(j.ping());
    } catch (RuntimeException e) {
      return false;
    }
  }

  static void await(String what, Duration within, Supplier<Boolean> cond) {
    long end = System.nanoTime() + within.toNanos();
    while (System.nanoTime() < end) {
      if (cond.get()) {
        return;
      }
      sleep(50);
    }
    throw new AssertionError("timed out waiting for " + what);
  }

  static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new RuntimeException(e);
    }
  }

  /** close kills every process this run started. */
  static void close() {
    synchronized (started) {
      for (Proc p : started) {
        p.kill();
      }
      started.clear();
    }
  }
}
