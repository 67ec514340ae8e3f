package server

import (
	"testing"
	"time"

	"github.com/fencerlock/fencer/fsm"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lessorTable is a table with a lessor timing it, applying commands at the
// next index.
type lessorTable struct {
	t     *testing.T
	table *fsm.Table
	ls    *lessor
	index uint64
}

func newLessorTable(t *testing.T) *lessorTable {
	table := fsm.New()
	return &lessorTable{t: t, table: table, ls: newLessor(table)}
}

func (lt *lessorTable) apply(c fsm.Command) *fsm.Result {
	lt.t.Helper()
	lt.index++
	r, ok := lt.table.Apply(&raft.Log{Index: lt.index, Type: raft.LogCommand, Data: c.Encode(nil)}).(*fsm.Result)
	require.True(lt.t, ok)
	return r
}

// One deadline queue times locks and sessions, and one expiry is in flight
// per lease, whatever happens between its due and its commit: it fails
// (retry), the lease is renewed (a new deadline ends it), or leadership
// moves and comes back (restartAll voids it: a retry of the old one does
// nothing, and every lease runs its full TTL again). ranOut agrees with due.
func TestLessorOneExpiryInFlightAcrossLeaderChanges(t *testing.T) {
	lt := newLessorTable(t)
	ls := lt.ls
	t0 := time.Now()
	ttl := time.Second
	grant := lt.apply(fsm.Command{Op: fsm.OpAcquire, Key: "k", Owner: "o", TTL: uint64(ttl / time.Millisecond)})
	require.Equal(t, fsm.Granted, grant.Code)
	ls.set("k", grant.Lease, t0)
	open := lt.apply(fsm.Command{Op: fsm.OpSessionOpen, TTL: 2 * uint64(ttl/time.Millisecond)})
	require.Equal(t, fsm.Opened, open.Code)
	sid := open.Position
	ls.setSession(sid, sid, 2*uint64(ttl/time.Millisecond), t0)

	next, ok := ls.next()
	require.True(t, ok)
	assert.Zero(t, next.Sub(t0.Add(ttl)), "the lock's deadline comes first")
	s, ok := ls.nextSession()
	require.True(t, ok)
	assert.Zero(t, s.Sub(t0.Add(2*ttl)))

	l, _ := lt.table.Get("k")
	assert.False(t, ls.ranOut(lockTimes(l), t0.Add(ttl-time.Millisecond)))
	assert.True(t, ls.ranOut(lockTimes(l), t0.Add(ttl)))
	locks, sessions := ls.due(t0.Add(ttl - time.Millisecond))
	assert.Empty(t, locks, "not before its deadline")
	assert.Empty(t, sessions)

	// Both run out: one expiry each, and only one.
	t1 := t0.Add(3 * ttl)
	locks, sessions = ls.due(t1)
	require.Equal(t, []dueLease{{key: "k", ref: grant.Lease.Ref()}}, locks)
	require.Equal(t, []dueSession{{id: sid, version: sid}}, sessions)
	locks, sessions = ls.due(t1)
	assert.Empty(t, locks, "an expiry is in flight")
	assert.Empty(t, sessions)
	_, ok = ls.next()
	assert.False(t, ok, "nothing else to time")

	// The expiries fail to commit: due again at once, once.
	ls.retry("k", grant.Lease.Ref(), t1)
	ls.retrySession(sid, sid, t1)
	locks, sessions = ls.due(t1)
	assert.Len(t, locks, 1)
	assert.Len(t, sessions, 1)

	// Leadership moves away and back before they commit: the new term
	// restarts every lease at its full TTL, and the old term's failed
	// expiries, retried late, change nothing.
	t2 := t1.Add(time.Second)
	ls.restartAll(t2)
	ls.retry("k", grant.Lease.Ref(), t2)
	ls.retrySession(sid, sid, t2)
	next, ok = ls.next()
	require.True(t, ok)
	assert.Zero(t, next.Sub(t2.Add(ttl)), "full TTL from the restart, not due at once")
	l, _ = lt.table.Get("k")
	assert.False(t, ls.ranOut(lockTimes(l), t2.Add(ttl-time.Millisecond)))
	locks, sessions = ls.due(t2.Add(ttl - time.Millisecond))
	assert.Empty(t, locks)
	assert.Empty(t, sessions)

	// Due again, then renewed while its expiry is in flight: the renewal's
	// deadline replaces it, and the stale expiry's retry does nothing.
	t3 := t2.Add(3 * ttl)
	locks, _ = ls.due(t3)
	require.Len(t, locks, 1)
	ext := lt.apply(fsm.Command{Op: fsm.OpExtend, Key: "k", Owner: "o", TTL: uint64(ttl / time.Millisecond)})
	require.Equal(t, fsm.Extended, ext.Code)
	ls.set("k", ext.Lease, t3)
	ls.retry("k", grant.Lease.Ref(), t3)
	next, ok = ls.next()
	require.True(t, ok)
	assert.Zero(t, next.Sub(t3.Add(ttl)))
	locks, _ = ls.due(t3.Add(ttl))
	require.Equal(t, []dueLease{{key: "k", ref: ext.Lease.Ref()}}, locks, "the renewed lease, not the old one")

	// A key without a TTL never runs out; an untimed lease counts as run
	// out rather than guessed.
	assert.False(t, ls.ranOut(timed{ttl: 0}, t3))
	assert.True(t, ls.ranOut(timed{ttl: 1000}, t3))
}

// The queue drops stale entries (renewed leases) once it holds more than
// twice what is live, for sessions as for locks.
func TestDeadlineQueueCompactsSessions(t *testing.T) {
	lt := newLessorTable(t)
	open := lt.apply(fsm.Command{Op: fsm.OpSessionOpen, TTL: 1000})
	sid := open.Position
	now := time.Now()
	for range 5000 {
		r := lt.apply(fsm.Command{Op: fsm.OpSessionRenew, Session: sid})
		require.Equal(t, fsm.Extended, r.Code)
		lt.ls.setSession(sid, r.Position, 1000, now)
	}
	assert.LessOrEqual(t, len(lt.ls.sessions.items), 2*lt.table.Sessions()+1024)
	d, ok := lt.ls.nextSession()
	require.True(t, ok)
	assert.Zero(t, d.Sub(now.Add(time.Second)))
}
