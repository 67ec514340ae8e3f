package io.github.fencerlock.fencer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * A lock/unlock pair's latency (tryAcquire, then release, one lock, one
 * caller) through this client beside the Go client's, in one run against
 * the same one-node fencerd: the Go side is clients/java/src/test/go/locklatency,
 * built here with go build. Not part of make test-java (tag "bench"); run
 * it with make bench-java. BENCH_PAIRS sets the number of pairs (default
 * 2000). A benchmark, so it asserts only that both sides ran.
 */
@Tag("bench")
class BenchTest {
  @Test
  void lockUnlockLatencyBesideTheGoClient() throws Exception {
    int pairs = Integer.parseInt(System.getenv().getOrDefault("BENCH_PAIRS", "2000"));
    Servers.Cluster cl = Servers.newCluster(1);
    String addr = cl.nodes.get(0).addr();
    String repo = System.getProperty("fencer.repo", "../..");
    Path goBin = Files.createTempDirectory("fencer-bench").resolve("locklatency");
    Process build = new ProcessBuilder("go", "build", "-o", goBin.toString(), "./clients/java/src/test/go/locklatency")
        .directory(Path.of(repo).toFile()).redirectErrorStream(true).start();
    String buildOut = new String(build.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertEquals(0, build.waitFor(), "go build: " + buildOut);
    try (FencerClient c = FencerClient.connect(addr)) {
      for (int round = 0; round < 2; round++) {
        // Alternate the two, so that neither has the server to itself first.
        String java = javaPairs(c, pairs);
        Process p = new ProcessBuilder(goBin.toString(), addr, Integer.toString(pairs)).redirectErrorStream(true).start();
        String go = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
        assertTrue(p.waitFor(300, TimeUnit.SECONDS));
        assertEquals(0, p.exitValue(), go);
        if (round == 0) {
          System.out.println("client  pairs  mean_us  p50_us  p99_us   (one lock/unlock pair: tryAcquire + release)");
        }
        for (String line : new String[] {java, go}) {
          String[] f = line.split(" ");
          System.out.printf("%-6s  %5s  %7s  %6s  %6s%n", f[0], f[1], f[2], f[3], f[4]);
        }
      }
    } finally {
      cl.stop();
    }
  }

  static String javaPairs(FencerClient c, int pairs) {
    LeaseOptions opts = new LeaseOptions().ttl(Duration.ofSeconds(10));
    for (int i = 0; i < pairs / 10; i++) { // warm up: the JIT, connections
      c.tryAcquire("bench/java", opts).release();
    }
    long[] d = new long[pairs];
    long sum = 0;
    for (int i = 0; i < pairs; i++) {
      long t0 = System.nanoTime();
      c.tryAcquire("bench/java", opts).release();
      d[i] = System.nanoTime() - t0;
      sum += d[i];
    }
    Arrays.sort(d);
    return String.format("java %d %.0f %.0f %.0f", pairs, sum / (double) pairs / 1e3, d[pairs / 2] / 1e3,
        d[pairs * 99 / 100] / 1e3);
  }
}
