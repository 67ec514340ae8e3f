package io.github.fencerlock.fencer;

import java.io.File;
import java.io.IOException;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import redis.clients.jedis.Jedis;

/**
 * Servers starts the real processes the tests talk to: fencerd (a shared
 * one-node cluster, and three-node clusters of their own for the failover
 * tests) and Debian's PostgreSQL, started as the other clients' suites start
 * it (initdb and pg_ctl, as user postgres when run as root). Every process is
 * stopped when the JVM exits.
 */
final class Servers {
  private Servers() {}

  private static final List<Proc> started = new ArrayList<>();
  private static Path workDir;
  private static Cluster one;
  private static Postgres postgres;

  static {
    Runtime.getRuntime().addShutdownHook(new Thread(Servers::closeAll));
  }

  static synchronized Path workDir() {
    if (workDir == null) {
      try {
        workDir = Files.createTempDirectory("fencer-java-client");
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

  /** Proc is one started process. */
  static final class Proc {
    final String name;
    final List<String> cmd;
    final Path log;
    final int port;
    Process process;

    Proc(String name, int port, List<String> cmd) {
      this.name = name;
      this.port = port;
      this.cmd = cmd;
      this.log = workDir().resolve(name + ".log");
    }

    Proc start() {
      try {
        process = new ProcessBuilder(cmd).redirectErrorStream(true)
            .redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile())).start();
      } catch (IOException e) {
        throw new RuntimeException(e);
      }
      synchronized (started) {
        started.add(this);
      }
      return this;
    }

    String addr() {
      return "127.0.0.1:" + port;
    }

    boolean alive() {
      return process != null && process.isAlive();
    }

    /** kill stops the process with SIGKILL and waits for it. */
    void kill() {
      if (alive()) {
        signal("CONT");
        process.destroyForcibly();
        try {
          process.waitFor(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }
    }

    /** signal sends SIGname (STOP, CONT) with kill(1): Java has no signal API. */
    void signal(String name) {
      if (process == null) {
        return;
      }
      Servers.signal(process.pid(), name);
    }

    String logText() {
      try {
        return Files.readString(log);
      } catch (IOException e) {
        return "";
      }
    }
  }

  static void signal(long pid, String name) {
    try {
      new ProcessBuilder("kill", "-" + name, Long.toString(pid)).redirectOutput(ProcessBuilder.Redirect.DISCARD)
          .redirectError(ProcessBuilder.Redirect.DISCARD).start().waitFor();
    } catch (IOException e) {
      throw new RuntimeException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** Cluster is a fencerd cluster of real processes. */
  static final class Cluster {
    final List<Proc> nodes = new ArrayList<>();

    List<String> addrs() {
      List<String> a = new ArrayList<>();
      for (Proc p : nodes) {
        a.add(p.addr());
      }
      return a;
    }

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

    /** leader waits until a live node leads and every live node knows it, and returns it. */
    Proc leader(Duration within) {
      Proc[] got = new Proc[1];
      await("a leader every live node knows", within, () -> {
        Proc l = null;
        for (Proc n : nodes) {
          if (n.alive() && "leader".equals(info(n, "fencer_role"))) {
            l = n;
          }
        }
        if (l == null) {
          return false;
        }
        for (Proc n : nodes) {
          if (n.alive()) {
            String known = info(n, "fencer_leader");
            if (known == null || known.isEmpty()) {
              return false;
            }
          }
        }
        got[0] = l;
        return true;
      });
      return got[0];
    }

    void stop() {
      for (Proc n : nodes) {
        n.kill();
      }
    }
  }

  private static final AtomicInteger clusters = new AtomicInteger();

  /** newCluster starts an n-node cluster and waits until it has a leader every node knows. */
  static Cluster newCluster(int n, String... extra) {
    Cluster c = new Cluster();
    int id = clusters.incrementAndGet();
    List<String> addrs = new ArrayList<>();
    List<Integer> ports = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      int p = freePort();
      ports.add(p);
      addrs.add("127.0.0.1:" + p);
    }
    for (int i = 0; i < n; i++) {
      int port = ports.get(i);
      String name = "c" + id + "-n" + (i + 1);
      List<String> cmd = new ArrayList<>(List.of(fencerd(), "--data-dir", workDir().resolve(name).toString(),
          "--listen", "127.0.0.1:" + port, "--raft-listen", "127.0.0.1:" + freePort(), "--http-listen", "off"));
      cmd.addAll(Arrays.asList(extra));
      if (i > 0) {
        cmd.add("--join");
        cmd.add(String.join(",", addrs.subList(0, i)));
      }
      Proc p = new Proc(name, port, cmd).start();
      c.nodes.add(p);
      if (i == 0) {
        await("fencerd " + p.addr() + " to lead", Duration.ofSeconds(20),
            () -> "leader".equals(Cluster.info(p, "fencer_role")));
      }
    }
    if (n > 1) {
      await("every node a member", Duration.ofSeconds(30), () -> {
        for (Proc p : c.nodes) {
          try (Jedis j = new Jedis("127.0.0.1", p.port, 2000)) {
            Object v = j.sendCommand(() -> "FENCE.MEMBERS".getBytes());
            if (!(v instanceof List) || ((List<?>) v).size() != n) {
              return false;
            }
          } catch (RuntimeException e) {
            return false;
          }
        }
        return true;
      });
    }
    c.leader(Duration.ofSeconds(30));
    return c;
  }

  /**
   * startNode starts a one-node cluster with extra flags (authentication,
   * TLS) and does not wait for it: the caller waits with a client that can
   * talk to it.
   */
  static Proc startNode(String... extra) {
    int port = freePort();
    String name = "node-" + port;
    List<String> cmd = new ArrayList<>(List.of(fencerd(), "--data-dir", workDir().resolve(name).toString(),
        "--listen", "127.0.0.1:" + port, "--raft-listen", "127.0.0.1:" + freePort(), "--http-listen", "off"));
    cmd.addAll(Arrays.asList(extra));
    return new Proc(name, port, cmd).start();
  }

  /** one returns the shared one-node cluster, started on first use. */
  static synchronized Cluster one() {
    if (one == null) {
      one = newCluster(1);
    }
    return one;
  }

  static String oneAddr() {
    return one().nodes.get(0).addr();
  }

  /** raw sends one command to addr with plain Jedis, outside the client under test. */
  static Object raw(String addr, String... args) {
    String[] hp = addr.split(":");
    try (Jedis j = new Jedis(hp[0], Integer.parseInt(hp[1]), 5000)) {
      byte[] name = args[0].getBytes();
      return j.sendCommand(() -> name, Arrays.copyOfRange(args, 1, args.length));
    }
  }

  static void await(String what, Duration within, BooleanSupplier cond) {
    long end = System.nanoTime() + within.toNanos();
    while (System.nanoTime() < end) {
      if (cond.getAsBoolean()) {
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

  // ---- PostgreSQL

  /** Postgres is a throwaway PostgreSQL cluster, run as user postgres when we are root. */
  static final class Postgres {
    final Path dir;
    final Path data;
    final String bin;
    final int port;
    final List<String> asUser = new ArrayList<>();
    private final AtomicInteger dbs = new AtomicInteger();

    Postgres() throws IOException, InterruptedException {
      bin = pgBin();
      // A directory of its own under /tmp: user postgres cannot enter workDir.
      dir = Files.createTempDirectory("fencer-java-pg");
      data = dir.resolve("data");
      if ("root".equals(System.getProperty("user.name"))) {
        run(List.of("chown", "postgres:postgres", dir.toString()));
        asUser.addAll(List.of("runuser", "-u", "postgres", "--"));
      }
      pg("initdb", "-D", data.toString(), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync");
      port = freePort();
      pg("pg_ctl", "-D", data.toString(), "-l", dir.resolve("postgres.log").toString(), "-o",
          "-c listen_addresses=127.0.0.1 -c port=" + port + " -c unix_socket_directories=" + dir + " -c fsync=off",
          "-w", "-t", "60", "start");
    }

    static String pgBin() {
      File[] versions = new File("/usr/lib/postgresql").listFiles();
      String best = null;
      int bestV = -1;
      if (versions != null) {
        for (File v : versions) {
          if (new File(v, "bin/initdb").canExecute()) {
            int n;
            try {
              n = Integer.parseInt(v.getName());
            } catch (NumberFormatException e) {
              n = 0;
            }
            if (n > bestV) {
              bestV = n;
              best = new File(v, "bin").getPath();
            }
          }
        }
      }
      if (best == null) {
        throw new IllegalStateException("these tests need a real PostgreSQL server (initdb, pg_ctl); on Debian: apt-get install postgresql");
      }
      return best;
    }

    private void pg(String name, String... args) throws IOException, InterruptedException {
      List<String> cmd = new ArrayList<>(asUser);
      cmd.add(bin + "/" + name);
      cmd.addAll(Arrays.asList(args));
      run(cmd);
    }

    private void run(List<String> cmd) throws IOException, InterruptedException {
      Process p = new ProcessBuilder(cmd).directory(dir.toFile()).redirectErrorStream(true).start();
      String out = new String(p.getInputStream().readAllBytes());
      if (!p.waitFor(120, TimeUnit.SECONDS) || p.exitValue() != 0) {
        throw new IllegalStateException(cmd + " failed: " + out);
      }
    }

    String url(String db) {
      return "jdbc:postgresql://127.0.0.1:" + port + "/" + db + "?user=postgres";
    }

    /** newDatabase creates a fresh database and returns its JDBC URL. */
    String newDatabase() throws SQLException {
      String db = "t" + dbs.incrementAndGet() + "_" + ProcessHandle.current().pid();
      try (Connection c = DriverManager.getConnection(url("postgres")); Statement st = c.createStatement()) {
        st.execute("CREATE DATABASE " + db);
      }
      return url(db);
    }

    void stop() {
      try {
        pg("pg_ctl", "-D", data.toString(), "-m", "immediate", "-w", "-t", "60", "stop");
      } catch (IOException | InterruptedException | RuntimeException e) {
        // the JVM is exiting
      }
    }
  }

  static synchronized Postgres postgres() throws Exception {
    if (postgres == null) {
      postgres = new Postgres();
    }
    return postgres;
  }

  static void closeAll() {
    synchronized (started) {
      for (Proc p : started) {
        p.kill();
      }
      started.clear();
    }
    if (postgres != null) {
      postgres.stop();
      delete(postgres.dir);
    }
    if (workDir != null) {
      delete(workDir);
    }
  }

  static void delete(Path dir) {
    try (java.util.stream.Stream<Path> s = Files.walk(dir)) {
      s.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    } catch (IOException | RuntimeException e) {
      // best effort, at exit
    }
  }
}
