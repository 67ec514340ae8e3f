package io.github.fencerlock.fencer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.fencerlock.fencer.jdbc.FencedTable;
import io.github.fencerlock.fencer.jdbc.StaleTokenException;
import io.github.fencerlock.fencer.jdbc.TokenRangeException;
import io.github.fencerlock.fencer.jdbc.TokenTable;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.Statement;
import org.junit.jupiter.api.Test;

/** The JDBC fenced store on a real PostgreSQL, with fencesql's tables and statements. */
class JdbcTest {
  static String one(Connection db, String sql) throws Exception {
    try (Statement st = db.createStatement(); ResultSet rs = st.executeQuery(sql)) {
      return rs.next() ? rs.getString(1) : null;
    }
  }

  @Test
  void aFencedTableRefusesALowerToken() throws Exception {
    try (Connection db = DriverManager.getConnection(Servers.postgres().newDatabase())) {
      try (Statement st = db.createStatement()) {
        st.execute("CREATE TABLE \"my docs\" (id TEXT PRIMARY KEY, token BIGINT NOT NULL, body TEXT, n INT)");
      }
      FencedTable t = new FencedTable("my docs", "id", "token", "body", "n");
      t.write(db, "d1", 5, "five", 5);
      t.write(db, "d1", 5, "five again", 6); // the same token may write again
      t.write(db, "d1", 7, "seven", 7);
      StaleTokenException e = assertThrows(StaleTokenException.class, () -> t.write(db, "d1", 6, "six", 6));
      assertEquals("d1", e.resource());
      assertEquals(6, e.token());
      assertEquals(7, e.highest());
      assertEquals("seven", one(db, "SELECT body FROM \"my docs\" WHERE id = 'd1'"));
      assertThrows(TokenRangeException.class, () -> t.write(db, "d2", -1, "x", 1));
      assertThrows(IllegalArgumentException.class, () -> t.write(db, "d2", 1, "x"));
    }
  }

  @Test
  void aTokenTableAdmitsInsideTheTransactionAndRollsBackAStaleOne() throws Exception {
    try (Connection db = DriverManager.getConnection(Servers.postgres().newDatabase())) {
      TokenTable tokens = new TokenTable();
      tokens.createTable(db);
      tokens.createTable(db); // IF NOT EXISTS
      try (Statement st = db.createStatement()) {
        st.execute("CREATE TABLE ledger (entry TEXT)");
      }
      assertFalse(tokens.highest(db, "acct").isPresent());
      tokens.transaction(db, "acct", 10, tx -> {
        try (Statement st = tx.createStatement()) {
          return st.executeUpdate("INSERT INTO ledger VALUES ('ten')");
        }
      });
      assertEquals(10, tokens.highest(db, "acct").getAsLong());
      assertThrows(StaleTokenException.class, () -> tokens.transaction(db, "acct", 9, tx -> {
        try (Statement st = tx.createStatement()) {
          return st.executeUpdate("INSERT INTO ledger VALUES ('nine')");
        }
      }));
      assertThrows(IllegalStateException.class, () -> tokens.transaction(db, "acct", 11, tx -> {
        try (Statement st = tx.createStatement()) {
          st.executeUpdate("INSERT INTO ledger VALUES ('eleven')");
        }
        throw new IllegalStateException("the work failed");
      }));
      assertEquals("1", one(db, "SELECT count(*) FROM ledger"));
      assertEquals(10, tokens.highest(db, "acct").getAsLong(), "the failed transaction's admit rolled back");
      assertTrue(db.getAutoCommit());
    }
  }
}
