package io.github.fencerlock.fencer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.fencerlock.fencer.jdbc.FencedTable;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Kleppmann's scenario, for real: a holder (a JVM of its own) takes a lease
 * renewed in the background and checks it; it is paused with SIGSTOP past
 * its TTL; a second client takes the lock with a higher token and writes to
 * PostgreSQL through the fenced table; the first holder resumes (SIGCONT)
 * and writes: the store refuses its late write and keeps the second's.
 */
class KleppmannTest {
  static String classPath() {
    String cp = System.getProperty("surefire.test.class.path");
    return cp != null && !cp.isEmpty() ? cp : System.getProperty("java.class.path");
  }

  @Test
  void aPausedHoldersLateWriteIsRefused() throws Exception {
    Servers.Cluster cl = Servers.newCluster(1);
    String addr = cl.nodes.get(0).addr();
    String url = Servers.postgres().newDatabase();
    try (Connection db = DriverManager.getConnection(url); FencerClient c = FencerClient.connect(addr)) {
      try (Statement st = db.createStatement()) {
        st.execute("CREATE TABLE reports (id TEXT PRIMARY KEY, token BIGINT NOT NULL, body TEXT)");
      }
      Process child = new ProcessBuilder(List.of(System.getProperty("java.home") + "/bin/java", "-cp", classPath(),
          KleppmannHolder.class.getName(), addr, url)).redirectError(ProcessBuilder.Redirect.INHERIT).start();
      try {
        BufferedReader out = new BufferedReader(new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8));
        String acquired = out.readLine();
        System.out.println("holder: " + acquired);
        assertTrue(acquired != null && acquired.startsWith("acquired "), String.valueOf(acquired));
        long first = Long.parseLong(acquired.substring("acquired ".length()));
        assertEquals("checked", out.readLine());
        Servers.signal(child.pid(), "STOP");
        System.out.println("holder paused with SIGSTOP at " + java.time.Instant.now());
        // The lease runs out on the server while the holder cannot renew it.
        Servers.await("the first lease to expire", Duration.ofSeconds(10), () -> c.status("report").isEmpty());
        try (Lease second = c.acquire("report", new LeaseOptions().ttl(Duration.ofSeconds(10)))) {
          System.out.println("second holder: token " + second.token() + " (first " + first + ")");
          assertTrue(second.token() > first);
          new FencedTable("reports", "id", "token", "body").write(db, "r1", second.token(), "second holder");
          Servers.signal(child.pid(), "CONT");
          System.out.println("holder resumed with SIGCONT; it writes with token " + first);
          OutputStream in = child.getOutputStream();
          in.write("write\n".getBytes(StandardCharsets.UTF_8));
          in.flush();
          String wrote = out.readLine();
          System.out.println("holder: " + wrote);
          assertEquals("wrote refused token " + first + " highest " + second.token() + " lost LeaseLostException", wrote);
          assertTrue(child.waitFor(20, TimeUnit.SECONDS));
          assertEquals(0, child.exitValue());
          try (Statement st = db.createStatement();
              ResultSet rs = st.executeQuery("SELECT token, body FROM reports WHERE id = 'r1'")) {
            assertTrue(rs.next());
            assertEquals(second.token(), rs.getLong(1));
            assertEquals("second holder", rs.getString(2));
            System.out.println("store: r1 = (" + rs.getLong(1) + ", " + rs.getString(2) + ")");
          }
        }
      } finally {
        Servers.signal(child.pid(), "CONT");
        child.destroyForcibly();
        cl.stop();
      }
    }
  }
}
