// Package server runs one fencer node: it owns Raft (hashicorp/raft with its
// default timeouts, a log store that fsyncs every append (raft-wal, or
// raft-boltdb for old data dirs; see store.go), a file snapshot store, TCP
// transport), the lock table, the leader's lease timers and its wait queues,
// and exposes them as a Go API with a context first on every call. It knows
// nothing of RESP.
//
// # Invariants kept here
//
//   - No acknowledgement before commit. Every write returns only after its
//     entry is committed and applied. If the outcome cannot be known
//     (leadership lost after the entry was proposed, the caller's deadline
//     passed while it was in flight), the error is ErrUnknownOutcome, never a
//     "not granted". A deadline that passes while the command still waits in
//     the leader's batcher queue withdraws it: the error is the context's,
//     and the command never takes effect.
//
//   - No early expiry. Only a ready leader times leases, on the monotonic
//     clock, from the moment it applies the grant or renewal (later than the
//     client sent it). A node that becomes leader first applies its whole log
//     (Barrier), then restarts every lease at its full TTL, as it does after
//     restoring a snapshot; only then does it serve. Expiry is an entry
//     naming the lease version it ends; the table ignores it if the lease was
//     renewed since. Followers never expire anything.
//
//   - A lease past its deadline on the leader reads as free, and an acquire
//     of it succeeds at once: the acquire entry ends the old lease first.
//
//   - FIFO waits without polling. A waiting acquire queues on the leader in
//     arrival order. The entry that frees the lock (release, expiry, revoke)
//     carries the head waiter, and the table grants it in that same entry.
//     A grant that reaches no caller (the wait ended or its connection closed
//     while the grant was in flight) is revoked by owner and token only, and
//     only once that owner has no acquire in progress that would return it.
//
// A lease shorter than a leader election (raft's default timeouts make one
// last one to a few seconds) cannot be renewed during an election, and a new
// leader restarts every lease at its full TTL, so a long TTL can outlive a
// dead holder by up to that TTL.
package server
