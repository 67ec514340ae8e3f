package io.github.fencerlock.fencer;

import io.github.fencerlock.fencer.jdbc.FencedTable;
import io.github.fencerlock.fencer.jdbc.StaleTokenException;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.sql.Connection;
import java.sql.DriverManager;
import java.time.Duration;
import java.util.concurrent.TimeUnit;

/**
 * KleppmannHolder is the first holder of the Kleppmann run, in a JVM of its
 * own so that the test can pause it (SIGSTOP): it takes a lease renewed in
 * the background, checks it is valid, and then, told to go on, writes with
 * its token to PostgreSQL, as a holder does whose pause fell between its
 * check and its write. Arguments: the fencer address and the JDBC URL.
 * Reports one line per step on stdout.
 */
public final class KleppmannHolder {
  private KleppmannHolder() {}

  public static void main(String[] args) throws Exception {
    try (FencerClient client = FencerClient.connect(args[0]);
        Connection db = DriverManager.getConnection(args[1])) {
      FencedTable reports = new FencedTable("reports", "id", "token", "body");
      Lease lease = client.acquire("report", new LeaseOptions().ttl(Duration.ofSeconds(1)).autoRenew(true));
      System.out.println("acquired " + lease.token());
      if (lease.isValid()) {
        System.out.println("checked"); // the lease is valid: go on and write
      }
      new BufferedReader(new InputStreamReader(System.in)).readLine(); // paused here
      String result;
      try {
        reports.write(db, "r1", lease.token(), "first holder, late");
        result = "accepted";
      } catch (StaleTokenException e) {
        result = "refused token " + e.token() + " highest " + e.highest();
      }
      // By now the client has noticed too: its validity ran out in the pause.
      FencerException cause = lease.done().get(10, TimeUnit.SECONDS);
      System.out.println("wrote " + result + " lost " + cause.getClass().getSimpleName());
    }
  }
}
