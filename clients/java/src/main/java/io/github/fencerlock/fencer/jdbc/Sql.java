package io.github.fencerlock.fencer.jdbc;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;

/**
 * Sql builds and runs the statements of Go's fence/fencesql for
 * PostgreSQL: one conditional upsert per fenced write, and a read of the
 * token that refused a write.
 */
final class Sql {
  private Sql() {}

  /** quote quotes a possibly schema-qualified identifier: "schema"."table". */
  static String quote(String name) {
    String[] parts = name.split("\\.", -1);
    List<String> q = new ArrayList<>();
    for (String p : parts) {
      q.add('"' + p.replace("\"", "\"\"") + '"');
    }
    return String.join(".", q);
  }

  /**
   * upsert builds INSERT INTO table (key, token, cols...) VALUES (...) ON
   * CONFLICT (key) DO UPDATE SET token = new, cols... WHERE stored token &lt;=
   * new token: one statement that inserts the row, or updates it if the token
   * allows, or does nothing (no row affected).
   */
  static String upsert(String table, String key, String token, List<String> cols) {
    List<String> all = new ArrayList<>();
    all.add(key);
    all.add(token);
    all.addAll(cols);
    List<String> names = new ArrayList<>();
    List<String> marks = new ArrayList<>();
    List<String> sets = new ArrayList<>();
    for (int i = 0; i < all.size(); i++) {
      names.add(quote(all.get(i)));
      marks.add("?");
      if (i > 0) {
        sets.add(quote(all.get(i)) + " = excluded." + quote(all.get(i)));
      }
    }
    return "INSERT INTO " + quote(table) + " (" + String.join(", ", names) + ") VALUES (" + String.join(", ", marks)
        + ") ON CONFLICT (" + quote(key) + ") DO UPDATE SET " + String.join(", ", sets) + " WHERE " + quote(table)
        + "." + quote(token) + " <= excluded." + quote(token);
  }

  static String select(String table, String key, String token) {
    return "SELECT " + quote(token) + " FROM " + quote(table) + " WHERE " + quote(key) + " = ?";
  }

  static void checkToken(long token) {
    if (token < 0) {
      throw new TokenRangeException("token " + Long.toUnsignedString(token) + " does not fit a BIGINT");
    }
  }

  /**
   * fencedWrite runs the upsert and turns "no row affected" into a
   * StaleTokenException, reading the token that refused it.
   */
  static void fencedWrite(Connection db, String up, String sel, String resource, Object key, long token, Object[] values)
      throws SQLException {
    checkToken(token);
    try (PreparedStatement st = db.prepareStatement(up)) {
      st.setObject(1, key);
      st.setLong(2, token);
      for (int i = 0; i < values.length; i++) {
        st.setObject(3 + i, values[i]);
      }
      if (st.executeUpdate() > 0) {
        return;
      }
    }
    try (PreparedStatement st = db.prepareStatement(sel)) {
      st.setObject(1, key);
      try (ResultSet rs = st.executeQuery()) {
        if (!rs.next()) {
          throw new SQLException("fence: write with token " + token + " to \"" + resource
              + "\" was refused, and no row holds the token that refused it");
        }
        throw new StaleTokenException(resource, token, rs.getLong(1));
      }
    }
  }
}
