// Package server runs one fencer node: it owns Raft (hashicorp/raft with its
// default timeouts, a log store that fsyncs every append (raft-wal; see
// store.go), a file snapshot store, TCP transport), the lock table, the
// leader's lease timers and its wait queues, and exposes them as a Go API
// with a context first on every call. It knows nothing of RESP.
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
//
// # Layout
//
//   - node.go: Node, Open and Close, Raft's start, readiness waits
//     (waitReady); loops.go: the background loops (leadership watcher,
//     expiry, snapshots by command count, leader-change counter).
//   - apply.go: applier, the raft.FSM: applies entries to the table and
//     makes the grant bookkeeping follow (applied.go) under its lock.
//   - grants.go: grants, what the node grants and times, under one lock
//     (mu) that the applier holds while it applies, and the one comment on
//     what mu guards. Its jobs, each a type or file of its own: readiness
//     and its term (readiness.go; readiness and the wait queue change
//     together under mu); planning an acquire (acquireplan.go, shared.go,
//     multi.go); following an applied entry (applied.go); timing expiries
//     (expiry.go); acquires in progress and grants that reached no caller
//     (deliveries.go); the wait queues (waits.go); quotas (quota.go).
//   - lessor.go: lessor, the deadlines of locks' and sessions' leases on
//     the lease clock, and ranOut, the one answer to whether a lease ran
//     out; deadlines.go: deadlineQueue, the one heap both are timed in.
//   - locks.go: the lock API (Acquire, Extend, Release, Revoke, Status) and
//     propose; txn.go: Update and Tx; batch.go: the group commit; latch.go:
//     per-key latches of transactions.
//   - sessions.go: sessions (OpenSession, KeepAlive, AcquireInSession...)
//     and sessiontimers.go, their deadlines (acted on by the leader); shared.go:
//     read-write locks and semaphores (AcquireShared, Holders); multi.go:
//     several keys at once (AcquireMany, ExtendMany, ReleaseMany);
//     watch.go: watches of a key's holder.
//   - identity.go: the cluster's ID, committed by its first leader.
//   - future.go: waiting on a Raft future within a context, and Raft's
//     errors in this package's terms (errors.go).
//   - members.go, shutdown.go, snapshot_restore.go: membership, shutdown,
//     restore; health.go and metrics.go: /readyz, /healthz and /metrics.
//   - store.go, durable.go, tlsstream.go: the Raft stores, the checks of a
//     data directory, the TLS transport; raftsettings.go: the Raft
//     settings besides Config's (config.go: Config, DefaultConfig,
//     Validate); raftlog.go: Raft's logs into the node's slog logger.
//   - faults.go, faults_enabled.go (-tags fencer_faults), faultnames.go:
//     the deliberate bugs and fault points of the fault campaign.
package server
