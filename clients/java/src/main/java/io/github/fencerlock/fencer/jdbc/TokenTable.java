package io.github.fencerlock.fencer.jdbc;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.List;
import java.util.OptionalLong;
import javax.sql.DataSource;

/**
 * TokenTable keeps the highest admitted token of each resource, for writes a
 * single row cannot carry: several rows or tables, deletions, anything a
 * transaction can do. Its columns are {@code resource} (TEXT, primary key)
 * and {@code token} (BIGINT), as Go's {@code fencesql.Tokens}; the
 * statements are the same, for PostgreSQL.
 *
 * <p>{@link #admit} records a token inside the caller's transaction; the row
 * it writes stays locked until the transaction ends, so writers of one
 * resource take turns, in token order, and a writer whose token is lower
 * than one admitted before is refused with {@link StaleTokenException}.
 */
public final class TokenTable {
  /** The default table name. */
  public static final String DEFAULT_NAME = "fence_tokens";

  private final String up;
  private final String sel;
  private final String ddl;

  /** Describes the table {@value #DEFAULT_NAME}. */
  public TokenTable() {
    this(DEFAULT_NAME);
  }

  /**
   * Describes the table name (it may be schema-qualified).
   *
   * @param name the table
   */
  public TokenTable(String name) {
    if (name == null || name.isEmpty()) {
      throw new IllegalArgumentException("empty table name");
    }
    this.up = Sql.upsert(name, "resource", "token", List.of());
    this.sel = Sql.select(name, "resource", "token");
    this.ddl = "CREATE TABLE IF NOT EXISTS " + Sql.quote(name) + " (\"resource\" TEXT PRIMARY KEY, \"token\" BIGINT NOT NULL)";
  }

  /**
   * createTable creates the table if it does not exist.
   *
   * @param db the connection
   * @throws SQLException if the database fails
   */
  public void createTable(Connection db) throws SQLException {
    try (Statement st = db.createStatement()) {
      st.execute(ddl);
    }
  }

  /**
   * admit records token as the highest for resource, inside the caller's
   * transaction on tx, if it is at least the highest recorded; otherwise it
   * throws a {@link StaleTokenException} and the caller must roll back.
   * Admit before the writes it guards.
   *
   * @param tx a connection inside a transaction
   * @param resource the resource the writes change
   * @param token the writer's fencing token
   * @throws SQLException if the database fails
   */
  public void admit(Connection tx, String resource, long token) throws SQLException {
    Sql.fencedWrite(tx, up, sel, resource, resource, token, new Object[0]);
  }

  /** Work is what runs in a fenced transaction. */
  @FunctionalInterface
  public interface Work<T> {
    /**
     * run does the transaction's writes on tx.
     *
     * @param tx the connection, inside the transaction
     * @return a result for the caller
     * @throws SQLException if the database fails
     */
    T run(Connection tx) throws SQLException;
  }

  /**
   * transaction runs work in a transaction on a connection of ds that first
   * admits token for resource, and commits if work returns. A stale token
   * ({@link StaleTokenException}), an exception from work or a failed commit
   * rolls everything back and is thrown.
   *
   * @param <T> work's result
   * @param ds the data source
   * @param resource the resource
   * @param token the writer's fencing token
   * @param work the writes
   * @return work's result
   * @throws SQLException if the database fails
   */
  public <T> T transaction(DataSource ds, String resource, long token, Work<T> work) throws SQLException {
    try (Connection c = ds.getConnection()) {
      return transaction(c, resource, token, work);
    }
  }

  /**
   * transaction is {@link #transaction(DataSource, String, long, Work)} on a
   * connection of the caller's, which it leaves in the auto-commit mode it
   * found. The connection must not be inside a transaction of the caller's:
   * this one commits or rolls back on it.
   *
   * @param <T> work's result
   * @param c the connection
   * @param resource the resource
   * @param token the writer's fencing token
   * @param work the writes
   * @return work's result
   * @throws SQLException if the database fails
   */
  public <T> T transaction(Connection c, String resource, long token, Work<T> work) throws SQLException {
    Sql.checkToken(token);
    boolean auto = c.getAutoCommit();
    c.setAutoCommit(false);
    try {
      admit(c, resource, token);
      T v = work.run(c);
      c.commit();
      return v;
    } catch (SQLException | RuntimeException | Error e) {
      try {
        c.rollback();
      } catch (SQLException re) {
        e.addSuppressed(re);
      }
      throw e;
    } finally {
      c.setAutoCommit(auto);
    }
  }

  /**
   * highest returns the highest token recorded for resource, or empty.
   *
   * @param db the connection
   * @param resource the resource
   * @return the token
   * @throws SQLException if the database fails
   */
  public OptionalLong highest(Connection db, String resource) throws SQLException {
    try (PreparedStatement st = db.prepareStatement(sel)) {
      st.setString(1, resource);
      try (ResultSet rs = st.executeQuery()) {
        return rs.next() ? OptionalLong.of(rs.getLong(1)) : OptionalLong.empty();
      }
    }
  }
}
