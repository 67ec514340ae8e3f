/**
 * Fenced writes to PostgreSQL through JDBC, with the tables and statements
 * of Go's {@code fence/fencesql}: a {@link io.github.fencerlock.fencer.jdbc.FencedTable}
 * whose rows carry their own token, written by one conditional upsert; and a
 * {@link io.github.fencerlock.fencer.jdbc.TokenTable} that admits a token
 * inside the caller's transaction. Both refuse a token lower than one the
 * store has seen with {@link io.github.fencerlock.fencer.jdbc.StaleTokenException}.
 */
package io.github.fencerlock.fencer.jdbc;
