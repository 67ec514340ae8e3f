// Package fencesql fences writes to a SQL database (database/sql) with the
// rule of package fence: a write carrying token t is admitted only if t is at
// least the highest token already admitted for its resource, and the check
// is made by the database, in the same statement or transaction as the
// write.
//
// Two forms:
//
//   - Table: each row carries its own token column, and Write is one
//     INSERT … ON CONFLICT DO UPDATE … WHERE token <= new token. The row is
//     the resource. One statement, no transaction needed (with MySQL, see
//     below, a transaction of its own). Deleting such a row
//     would forget its token, so delete by writing a tombstone (or use
//     Tokens).
//   - Tokens: a table of (resource, token) pairs, and Do, which opens a
//     transaction, admits the token with the same upsert (which also locks
//     the resource's row until the transaction ends), runs any writes to any
//     tables in it, and commits. A stale token rolls everything back.
//
// For data guarded by a read-write lock, RWTokens keeps two tokens per
// resource (the read-write rule of fence.RWValidator) and admits reads and
// writes in a transaction as Tokens does: AdmitRead and AdmitWrite, DoRead
// and DoWrite.
//
// The upsert syntax is shared by PostgreSQL (9.5 and later) and SQLite
// (3.24 and later); the Dialect says which placeholders to use.
//
// MySQL and MariaDB (Dialect MySQL, InnoDB tables) write it as INSERT … ON
// DUPLICATE KEY UPDATE col = IF(token <= VALUES(token), VALUES(col), col),
// …, token last. Its rows-affected count cannot tell a refused write from an
// admitted one that wrote the values the row already held, and changes
// meaning with the client's CLIENT_FOUND_ROWS flag, so the statement is
// followed, in the same transaction, by a locking read of the row's token:
// admitted iff it is the token written. Table.Write on a *sql.DB begins and
// commits that transaction itself; on a *sql.Tx (and in Tokens.Do) it is
// part of the caller's. Any DSN options do. A Tokens table's resource column
// is VARBINARY(MySQLResourceMax): longer names are refused, and names
// compare byte for byte, as TEXT does in the other databases.
//
// With PostgreSQL, at the default READ COMMITTED isolation, a write that
// meets a row being written by another transaction waits for it to end and
// then re-checks the row's new token. With MySQL it does the same at any
// isolation level: the upsert and the read that follows it read the newest
// row, not the transaction's snapshot. With SQLite, a writer holds the whole
// database until it commits; give the connection a busy timeout (for
// modernc.org/sqlite, _pragma=busy_timeout(10000) in the DSN) so that
// concurrent writers wait instead of failing with SQLITE_BUSY.
//
// Tokens are stored as BIGINT, so a token above 1<<63-1 is refused with
// ErrTokenRange; fencer's tokens are Raft log indices and never come near.
package fencesql
