package io.github.fencerlock.fencer.jdbc;

import java.sql.Connection;
import java.sql.SQLException;
import java.util.List;

/**
 * FencedTable is a table whose rows each carry their own fencing token: a
 * key column (its primary key, or another unique column), a BIGINT token
 * column, and the data columns that {@link #write} sets. A write inserts the
 * row, or updates it if its token column holds at most the write's token, in
 * one statement; a row with a higher token refuses it. The statements are
 * those of Go's {@code fencesql.Table} for PostgreSQL.
 *
 * <pre>{@code
 * CREATE TABLE orders (id TEXT PRIMARY KEY, token BIGINT NOT NULL, body TEXT);
 * }</pre>
 */
public final class FencedTable {
  private final String name;
  private final int columns;
  private final String up;
  private final String sel;

  /**
   * Describes the table (it may be schema-qualified); does not create it.
   *
   * @param name the table
   * @param keyColumn its key column
   * @param tokenColumn its BIGINT token column
   * @param columns the data columns write sets, in order
   */
  public FencedTable(String name, String keyColumn, String tokenColumn, String... columns) {
    for (String n : List.of(name, keyColumn, tokenColumn)) {
      if (n == null || n.isEmpty()) {
        throw new IllegalArgumentException("empty table or column name");
      }
    }
    for (String n : columns) {
      if (n == null || n.isEmpty()) {
        throw new IllegalArgumentException("empty table or column name");
      }
    }
    this.name = name;
    this.columns = columns.length;
    this.up = Sql.upsert(name, keyColumn, tokenColumn, List.of(columns));
    this.sel = Sql.select(name, keyColumn, tokenColumn);
  }

  /**
   * write inserts the row with key, or updates it if its token column holds
   * at most token; values go to the data columns. If the row holds a higher
   * token, nothing changes and write throws a {@link StaleTokenException}
   * whose resource is the key as text. db may be inside a transaction: the
   * write is then part of it.
   *
   * @param db the connection
   * @param key the row's key
   * @param token the writer's fencing token
   * @param values the data columns' values
   * @throws SQLException if the database fails
   */
  public void write(Connection db, Object key, long token, Object... values) throws SQLException {
    if (values.length != columns) {
      throw new IllegalArgumentException(values.length + " values for " + columns + " columns of " + name);
    }
    Sql.fencedWrite(db, up, sel, String.valueOf(key), key, token, values);
  }
}
