// Package fsm is fencer's replicated lock table: the state machine that Raft
// feeds with committed log entries.
//
// Everything in this package is deterministic. Apply decodes an entry, changes
// the table and returns a *Result; it never reads a clock, never draws a random
// number and never does I/O, so every node that applies the same log holds the
// same table, byte for byte (Snapshot proves it).
//
// # Invariants kept here
//
//   - Tokens. A grant's token is floor + index, where index is the Raft log
//     index of the entry that made the grant and floor is a number kept in the
//     table and its snapshots (zero for a cluster that was never restored from
//     another's snapshot). Indices only grow, so every grant's token is larger
//     than every earlier grant's, for every lock, across restarts and snapshot
//     installs. An entry may hold a batch of n commands (the leader's group
//     commit): the i-th is applied at position floor + index + i and the floor
//     then grows by n-1, so each command still has a position, and each grant
//     a token, of its own. A transaction (OpTxn) is one command that may grant
//     more than one lock; they then share its token, and it grants each key
//     at most once. (A release or expiry that hands its lock to a waiter
//     frees and grants the same lock: one grant.)
//
//   - Leases carry no time. A lease records its TTL in milliseconds and the
//     position of the entry that last granted or extended it (its version).
//     Only the leader times leases; when one runs out it proposes an Expire
//     naming the token and version it saw, and Apply frees the lock only if the
//     lease was not renewed since. A deposed leader's late expiry is therefore
//     harmless.
//
//   - Safe retries. Acquire by the holder returns the same token and renews
//     the lease. The table remembers the last release of each key as (owner,
//     token): a repeated release by that owner reports success, and an
//     acquire by that owner is refused, so a delayed retry cannot resurrect a
//     released lock. The memory is bounded: an entry is forgotten once
//     ReleaseMemoryWindow log positions have passed or when more than
//     ReleaseMemoryMax releases are remembered, oldest first. Both are
//     functions of log position only.
//
//   - Waiters. The leader keeps its wait queues in memory and attaches the
//     head waiter to the entry that it expects to free a lock (release,
//     expiry, revoke). After the command, if the key is free, Apply grants it
//     to the attached waiter in the same entry, so a hand-off is one commit.
//
//   - One command, one entry, all or nothing. A request that needs several
//     lock commands (a Redis script, DEL of several keys) is one OpTxn: the
//     leader works it out on a Draft (the same apply code, on copies of the
//     keys it reads) and proposes the commands with a guard per key read.
//     Apply checks every guard first; if one no longer holds, nothing is
//     applied (Conflict) and the leader works the request out again. So a
//     transaction never takes effect in part, and what it did is exactly what
//     its draft saw.
//
// An entry that cannot be decoded is corruption: Apply panics with its index.
//
// # Layout
//
//   - command.go: Command, its ops and flags, and a plain command's
//     encoding, whose layout is written once (Command.layout): Encode,
//     Decode and encodedLen walk it with a codec in their mode (codec.go,
//     with the decoder and the string and varint helpers). A batch
//     (JoinEntries, DecodeEntry) wraps plain commands; a transaction
//     (txn.go: Txn, its guards and scans) has a form of its own, also
//     written once (Txn.layout) and walked by the same codec.
//     testdata/golden holds the bytes of every op and flag combination,
//     of transactions and of every snapshot version (golden_test.go): the
//     format changes only on purpose.
//   - apply.go: Apply, and applyInto, which dispatches each op to a method
//     of its own (applyAcquire, applyRelease, ...); shared.go the shared
//     keys' (read-write locks, semaphores); session.go the session
//     commands.
//   - table.go: Table, its leases and release memory, and the reads the
//     server makes of it; draft.go the transaction drafts the leader works
//     on.
//   - snapshot.go, restore.go: the snapshot format (every older version is
//     still read) and a new cluster made from another's snapshot;
//     watchread.go: what a watch reads.
//   - format.go: the cluster's format level (OpFormat): which formats the
//     leader may write while members of older builds remain, the snapshot
//     version each level writes, and FormatError for what this build
//     cannot read.
package fsm
