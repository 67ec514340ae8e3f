package fsm

import (
	"bytes"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func openSession(ttl uint64) Command { return Command{Op: OpSessionOpen, TTL: ttl} }
func sessionAcquire(key, owner string, session uint64) Command {
	return Command{Op: OpAcquire, Key: key, Owner: owner, Session: session}
}

func TestSessionHoldsLocksUntilItEnds(t *testing.T) {
	for _, end := range []struct {
		name     string
		cmd      func(id, version uint64) Command
		code     Code
		sub      Code
		remember bool
	}{
		{"close", func(id, _ uint64) Command { return Command{Op: OpSessionClose, Session: id} }, Closed, Released, true},
		{"expire", func(id, v uint64) Command {
			return Command{Op: OpSessionExpire, Session: id, Lease: &LeaseRef{Version: v}}
		}, Expired, Expired, false},
		{"revoke", func(id, _ uint64) Command { return Command{Op: OpSessionRevoke, Session: id} }, Revoked, Revoked, false},
	} {
		t.Run(end.name, func(t *testing.T) {
			a := newApplier()
			open := a.apply(t, openSession(5000))
			require.Equal(t, Opened, open.Code)
			id := open.Position
			g1 := a.apply(t, sessionAcquire("k1", "o", id))
			g2 := a.apply(t, sessionAcquire("k2", "o", id))
			require.Equal(t, Granted, g1.Code)
			require.Equal(t, Granted, g2.Code)
			assert.Equal(t, id, g1.Lease.Session)
			assert.Zero(t, g1.Lease.TTL, "a lock under a session has no TTL of its own")
			// A repeated acquire returns the same grant.
			again := a.apply(t, sessionAcquire("k1", "o", id))
			assert.Equal(t, Renewed, again.Code)
			assert.Equal(t, g1.Lease.Token, again.Lease.Token)
			// The same owner outside the session does not hold it.
			assert.Equal(t, Held, a.apply(t, acquire("k1", "o", 1000)).Code)
			assert.Equal(t, NotHolder, a.apply(t, extend("k1", "o", 1000)).Code)

			renew := a.apply(t, Command{Op: OpSessionRenew, Session: id})
			require.Equal(t, Extended, renew.Code)
			// An expiry naming the renewal before is stale.
			assert.Equal(t, Stale, a.apply(t, Command{Op: OpSessionExpire, Session: id, Lease: &LeaseRef{Version: id}}).Code)

			// k2 has a waiter; k1 not.
			r := a.apply(t, func() Command {
				c := end.cmd(id, renew.Position)
				c.Waiters = []KeyWaiter{{Key: "k2", Waiter: Waiter{Owner: "w", TTL: 1000}}}
				return c
			}())
			require.Equal(t, end.code, r.Code)
			require.Len(t, r.Sub, 2)
			assert.Equal(t, "k1", r.Sub[0].Cmd.Key)
			assert.Equal(t, end.sub, r.Sub[0].Code)
			assert.Equal(t, g1.Lease.Token, r.Sub[0].Freed.Token)
			assert.Zero(t, r.Sub[0].Lease.Token)
			assert.Equal(t, WaiterGranted, r.Sub[1].Waiter)
			assert.Equal(t, r.Position, r.Sub[1].Lease.Token, "the hand-off's token is the entry's position")
			assert.Equal(t, "w", r.Sub[1].Lease.Owner)
			_, open2 := a.t.Session(id)
			assert.False(t, open2)

			// A closed session's releases are remembered; an ended session
			// grants nothing more.
			assert.Equal(t, NoSession, a.apply(t, sessionAcquire("k3", "o", id)).Code)
			rel := a.apply(t, Command{Op: OpRelease, Key: "k1", Owner: "o", Session: id})
			if end.remember {
				assert.Equal(t, AlreadyReleased, rel.Code)
			} else {
				assert.Equal(t, NotHolder, rel.Code)
			}
			assert.Equal(t, NoSession, a.apply(t, Command{Op: OpSessionClose, Session: id}).Code)
		})
	}
}

func TestWaiterUnderEndedSessionIsNotGranted(t *testing.T) {
	a := newApplier()
	a.apply(t, acquire("k", "x", 1000))
	s := a.apply(t, openSession(5000)).Position
	a.apply(t, Command{Op: OpSessionClose, Session: s})
	r := a.apply(t, Command{Op: OpRelease, Key: "k", Owner: "x", Waiter: &Waiter{Owner: "w", Session: s}})
	assert.Equal(t, Released, r.Code)
	assert.Equal(t, WaiterNoSession, r.Waiter)
	_, held := a.t.Get("k")
	assert.False(t, held)

	// Under an open session the hand-off joins it.
	s2 := a.apply(t, openSession(5000)).Position
	g := a.apply(t, Command{Op: OpGrant, Key: "k", Waiter: &Waiter{Owner: "w", Session: s2}})
	assert.Equal(t, Granted, g.Code)
	keys, open := a.t.SessionKeys(s2)
	require.True(t, open)
	assert.Equal(t, []string{"k"}, keys)
	// A revoke of the key takes it out of the session.
	a.apply(t, Command{Op: OpRevoke, Key: "k"})
	keys, _ = a.t.SessionKeys(s2)
	assert.Empty(t, keys)
}

func TestProclaimKeepsToken(t *testing.T) {
	a := newApplier()
	s := a.apply(t, openSession(5000)).Position
	c := sessionAcquire("e", "me", s)
	c.Data = "v1"
	g := a.apply(t, c)
	require.Equal(t, Granted, g.Code)
	assert.Equal(t, "v1", g.Lease.Data)
	p := a.apply(t, Command{Op: OpProclaim, Key: "e", Owner: "me", Session: s, Data: "v2"})
	assert.Equal(t, Proclaimed, p.Code)
	assert.Equal(t, g.Lease.Token, p.Lease.Token)
	assert.Equal(t, "v2", p.Lease.Data)
	assert.Equal(t, NotHolder, a.apply(t, Command{Op: OpProclaim, Key: "e", Owner: "other", Session: s, Data: "x"}).Code)
}

func TestSessionSnapshotRoundTrip(t *testing.T) {
	a := newApplier()
	s := a.apply(t, openSession(5000)).Position
	c := sessionAcquire("e", "me", s)
	c.Data = "v1"
	a.apply(t, c)
	a.apply(t, sessionAcquire("f", "me", s))
	a.apply(t, acquire("g", "plain", 1000))
	b := New()
	require.NoError(t, b.Restore(io.NopCloser(bytes.NewReader(a.t.MarshalSnapshot()))))
	assert.Equal(t, a.t.MarshalSnapshot(), b.MarshalSnapshot())
	keys, open := b.SessionKeys(s)
	require.True(t, open)
	assert.Equal(t, []string{"e", "f"}, keys)
	l, _ := b.Get("e")
	assert.Equal(t, "v1", l.Data)
	assert.Equal(t, s, l.Session)
}

func TestDecodeRejectsMalformedSessionCommands(t *testing.T) {
	for name, c := range map[string]Command{
		"open without TTL":       {Op: OpSessionOpen},
		"open with a key":        {Op: OpSessionOpen, TTL: 10, Key: "k"},
		"renew without session":  {Op: OpSessionRenew},
		"expire without lease":   {Op: OpSessionExpire, Session: 3},
		"acquire TTL in session": {Op: OpAcquire, Key: "k", Owner: "o", TTL: 10, Session: 3},
		"extend in session":      {Op: OpExtend, Key: "k", Owner: "o", TTL: 10, Session: 3},
		"value outside session":  {Op: OpAcquire, Key: "k", Owner: "o", TTL: 10, Data: "v"},
		"proclaim no session":    {Op: OpProclaim, Key: "k", Owner: "o", Data: "v"},
		"waiters on a release":   {Op: OpRelease, Key: "k", Owner: "o", Waiters: []KeyWaiter{{Key: "k", Waiter: Waiter{Owner: "w", TTL: 1}}}},
		"waiters out of order": {Op: OpSessionClose, Session: 3, Waiters: []KeyWaiter{
			{Key: "b", Waiter: Waiter{Owner: "w", TTL: 1}}, {Key: "a", Waiter: Waiter{Owner: "w", TTL: 1}}}},
	} {
		_, err := Decode(c.Encode(nil))
		assert.ErrorIs(t, err, ErrBadEntry, name)
	}
	good := Command{Op: OpSessionClose, Session: 300, Waiters: []KeyWaiter{
		{Key: "a", Waiter: Waiter{Owner: "w", TTL: 1}}, {Key: "b", Waiter: Waiter{Owner: "v", Session: 9}}}}
	got, err := Decode(good.Encode(nil))
	require.NoError(t, err)
	assert.Equal(t, good, got)
	assert.Len(t, good.Encode(nil), good.encodedLen())
}

// A lock freed from under a session by anything but its holder's release
// counts as taken; the holder's own release does not.
func TestSessionCountsLocksTakenFromIt(t *testing.T) {
	a := newApplier()
	s := a.apply(t, openSession(5000)).Position
	for _, k := range []string{"a", "b", "c"} {
		require.Equal(t, Granted, a.apply(t, sessionAcquire(k, "o", s)).Code)
	}
	a.apply(t, Command{Op: OpRelease, Key: "a", Owner: "o", Session: s})
	info, _ := a.t.Session(s)
	assert.Zero(t, info.Taken)
	a.apply(t, Command{Op: OpRevoke, Key: "b"})
	a.apply(t, Command{Op: OpPut, Key: "c", Owner: "x"})
	info, _ = a.t.Session(s)
	assert.Equal(t, uint64(2), info.Taken)
	assert.Zero(t, info.Locks)
	// The leader's revoke of a grant no caller received names the session:
	// not taken.
	require.Equal(t, Granted, a.apply(t, sessionAcquire("d", "o", s)).Code)
	require.Equal(t, Revoked, a.apply(t, Command{Op: OpRevoke, Key: "d", Owner: "o", Session: s}).Code)
	info, _ = a.t.Session(s)
	assert.Equal(t, uint64(2), info.Taken)
	assert.Zero(t, info.Locks)
	b := New()
	require.NoError(t, b.Restore(io.NopCloser(bytes.NewReader(a.t.MarshalSnapshot()))))
	info2, _ := b.Session(s)
	assert.Equal(t, info.Taken, info2.Taken)
}

// The hand-offs of a session's end are grants to different waiters: each
// gets a position and a token of its own, and the commands after it
// follow on, in an entry of its own or in a batch.
func TestSessionEndHandOffsGetTokensOfTheirOwn(t *testing.T) {
	for _, batched := range []bool{false, true} {
		a := newApplier()
		s := a.apply(t, openSession(5000)).Position
		for _, k := range []string{"a", "b", "c"} {
			a.apply(t, sessionAcquire(k, "o", s))
		}
		end := Command{Op: OpSessionClose, Session: s, Waiters: []KeyWaiter{
			{Key: "a", Waiter: Waiter{Owner: "wa", TTL: 1000}},
			{Key: "c", Waiter: Waiter{Owner: "wc", TTL: 1000}},
			{Key: "b", Waiter: Waiter{Owner: "wb", TTL: 1000}},
		}}
		end.Waiters[1], end.Waiters[2] = end.Waiters[2], end.Waiters[1] // key order
		var r, next *Result
		if batched {
			rs := a.applyBatch(t, []Command{end, openSession(1000)})
			r, next = rs[0], rs[1]
		} else {
			r = a.apply(t, end)
			next = a.apply(t, openSession(1000))
		}
		require.Len(t, r.Sub, 3)
		for i, sub := range r.Sub {
			assert.Equal(t, r.Position+uint64(i), sub.Lease.Token, "hand-off %d", i)
			assert.Equal(t, sub.Lease.Token, sub.Position)
		}
		assert.Equal(t, r.Position+3, next.Position, "the next command follows the hand-offs' positions")
		assert.Equal(t, a.t.Position(), next.Position)
	}
}

// A Redis-compatible SET (OpPut of a string) over a lock held under a
// session replaces the lock: the key is no longer held under the session,
// so the session's end must not free it, and a later DEL of the key must
// not leave the session naming a key that is gone (its end would then
// dereference a missing lease). A table restored from a snapshot in between
// must end the session exactly as the original does.
func TestPutOverSessionLockLeavesTheSession(t *testing.T) {
	a := newApplier()
	s := a.apply(t, openSession(5000)).Position
	require.Equal(t, Granted, a.apply(t, sessionAcquire("k", "o", s)).Code)
	require.Equal(t, Written, a.apply(t, putString("k", "redis-value", 0)).Code)

	keys, open := a.t.SessionKeys(s)
	require.True(t, open)
	assert.Empty(t, keys, "k is a plain Redis string now, not held under the session")
	info, _ := a.t.Session(s)
	assert.Zero(t, info.Locks)

	// A replica restored from a snapshot taken now.
	b := &applier{t: New(), index: a.index}
	require.NoError(t, b.t.Restore(io.NopCloser(bytes.NewReader(a.t.MarshalSnapshot()))))

	ra := a.apply(t, Command{Op: OpSessionClose, Session: s})
	rb := b.apply(t, Command{Op: OpSessionClose, Session: s})
	assert.Len(t, ra.Sub, len(rb.Sub), "the replicas disagree on what the session's end frees")
	l, held := a.t.Get("k")
	assert.True(t, held, "the session's end freed a key it no longer held")
	assert.Equal(t, "redis-value", l.Owner)
	assert.Equal(t, a.t.MarshalSnapshot(), b.t.MarshalSnapshot(), "replicas diverged")
}

func TestPutThenDelOfSessionLockThenSessionEnd(t *testing.T) {
	a := newApplier()
	s := a.apply(t, openSession(5000)).Position
	require.Equal(t, Granted, a.apply(t, sessionAcquire("k", "o", s)).Code)
	require.Equal(t, Written, a.apply(t, putString("k", "o", 0)).Code)
	require.Equal(t, Revoked, a.apply(t, Command{Op: OpRevoke, Key: "k"}).Code)
	var r *Result
	require.NotPanics(t, func() { r = a.apply(t, Command{Op: OpSessionExpire, Session: s, Lease: &LeaseRef{Version: s}}) },
		"a session's end must not panic (every replica would, at the same entry)")
	assert.Equal(t, Expired, r.Code)
	assert.Empty(t, r.Sub)
}
