package fsm

import (
	"bytes"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func rlock(key, owner string) Command {
	return Command{Op: OpAcquire, Key: key, Owner: owner, TTL: 1000, Mode: ModeRead}
}
func wlock(key, owner string) Command {
	return Command{Op: OpAcquire, Key: key, Owner: owner, TTL: 1000, Mode: ModeWrite}
}
func permit(key, owner string, n uint64) Command {
	return Command{Op: OpAcquire, Key: key, Owner: owner, TTL: 1000, Mode: ModePermit, Permits: n}
}

// Readers hold together with tokens of their own; a writer waits for all of
// them and its token exceeds theirs; a writer excludes readers.
func TestReadWriteLock(t *testing.T) {
	a := newApplier()
	r1 := a.apply(t, rlock("k", "r1"))
	r2 := a.apply(t, rlock("k", "r2"))
	require.Equal(t, Granted, r1.Code)
	require.Equal(t, Granted, r2.Code)
	assert.Equal(t, r1.Position, r1.Holder.Token)
	assert.Greater(t, r2.Holder.Token, r1.Holder.Token)
	assert.Equal(t, Held, a.apply(t, wlock("k", "w")).Code)
	assert.Equal(t, Mismatch, a.apply(t, permit("k", "p", 2)).Code)
	assert.Equal(t, Held, a.apply(t, Command{Op: OpAcquire, Key: "k", Owner: "x", TTL: 1000}).Code, "a plain acquire")
	// A reader asking to write is refused: no upgrade.
	assert.Equal(t, Held, a.apply(t, wlock("k", "r1")).Code)
	assert.Equal(t, Released, a.apply(t, Command{Op: OpRelease, Key: "k", Owner: "r1"}).Code)
	assert.Equal(t, NotHolder, a.apply(t, Command{Op: OpRelease, Key: "k", Owner: "r1"}).Code, "not remembered")
	// The last reader's release hands the lock to the writer in the same entry.
	rel := a.apply(t, Command{Op: OpRelease, Key: "k", Owner: "r2", Waiter: &Waiter{Owner: "w", TTL: 1000, Mode: ModeWrite}})
	require.Equal(t, WaiterGranted, rel.Waiter)
	require.NotNil(t, rel.Holder)
	assert.Equal(t, ModeWrite, rel.Holder.Mode)
	assert.Greater(t, rel.Holder.Token, r2.Holder.Token)
	assert.Equal(t, Held, a.apply(t, rlock("k", "r3")).Code)
	// Downgrade: same token, and readers may join.
	d := a.apply(t, rlock("k", "w"))
	require.Equal(t, Renewed, d.Code)
	assert.Equal(t, ModeRead, d.Holder.Mode)
	assert.Equal(t, rel.Holder.Token, d.Holder.Token)
	assert.Equal(t, Granted, a.apply(t, rlock("k", "r3")).Code)
	// Expiry frees one holder; the key goes with its last.
	l, _ := a.t.Get("k")
	require.Len(t, l.Shared.Holders, 2)
	h := l.Shared.Holders[0]
	e := a.apply(t, Command{Op: OpExpire, Key: "k", Lease: &LeaseRef{Token: h.Token, Version: h.Version}})
	assert.Equal(t, Expired, e.Code)
	assert.Equal(t, h.Token, e.Freed.Token)
	assert.Equal(t, Revoked, a.apply(t, Command{Op: OpRevoke, Key: "k"}).Code)
	_, held := a.t.Get("k")
	assert.False(t, held)
	// Now any kind may take it.
	assert.Equal(t, Granted, a.apply(t, permit("k", "p", 2)).Code)
}

// A semaphore's permits take the lowest free slot; the N+1th waits; an
// expiry hands the slot to the waiter in the same entry with a larger token.
func TestSemaphoreSlots(t *testing.T) {
	a := newApplier()
	var toks []uint64
	for i, o := range []string{"a", "b", "c"} {
		r := a.apply(t, permit("s", o, 3))
		require.Equal(t, Granted, r.Code)
		assert.Equal(t, uint64(i), r.Holder.Slot)
		toks = append(toks, r.Holder.Token)
	}
	assert.Equal(t, Held, a.apply(t, permit("s", "d", 3)).Code)
	assert.Equal(t, Mismatch, a.apply(t, permit("s", "d", 4)).Code)
	assert.Equal(t, Mismatch, a.apply(t, rlock("s", "d")).Code)
	again := a.apply(t, permit("s", "b", 3))
	require.Equal(t, Renewed, again.Code)
	assert.Equal(t, toks[1], again.Holder.Token)
	l, _ := a.t.Get("s")
	b := l.Shared.byOwner("b", 0)
	e := a.apply(t, Command{Op: OpExpire, Key: "s", Lease: &LeaseRef{Token: b.Token, Version: b.Version},
		Waiter: &Waiter{Owner: "d", TTL: 1000, Mode: ModePermit, Permits: 3}})
	require.Equal(t, Expired, e.Code)
	require.Equal(t, WaiterGranted, e.Waiter)
	assert.Equal(t, uint64(1), e.Holder.Slot, "the freed slot")
	assert.Greater(t, e.Holder.Token, toks[2])
	assert.Equal(t, Stale, a.apply(t, Command{Op: OpExpire, Key: "s", Lease: &LeaseRef{Token: b.Token, Version: b.Version}}).Code)
}

// A session's end frees its holders of shared keys and hands the key on;
// snapshots keep shared keys, and restore them with their sessions.
func TestSharedUnderSessionsAndSnapshots(t *testing.T) {
	a := newApplier()
	s := a.apply(t, openSession(5000)).Position
	c := rlock("k", "r1")
	c.TTL, c.Session = 0, s
	require.Equal(t, Granted, a.apply(t, c).Code)
	c.Owner = "r2"
	require.Equal(t, Granted, a.apply(t, c).Code)
	require.Equal(t, Granted, a.apply(t, rlock("k", "r3")).Code)
	p := permit("sem", "p", 2)
	p.TTL, p.Session = 0, s
	require.Equal(t, Granted, a.apply(t, p).Code)
	keys, _ := a.t.SessionKeys(s)
	assert.Equal(t, []string{"k", "sem"}, keys)

	b := New()
	require.NoError(t, b.Restore(io.NopCloser(bytes.NewReader(a.t.MarshalSnapshot()))))
	assert.Equal(t, a.t.MarshalSnapshot(), b.MarshalSnapshot())
	keys, _ = b.SessionKeys(s)
	assert.Equal(t, []string{"k", "sem"}, keys)

	// One reader under the session leaves: the key stays in the session.
	require.Equal(t, Released, a.apply(t, Command{Op: OpRelease, Key: "k", Owner: "r1", Session: s}).Code)
	keys, _ = a.t.SessionKeys(s)
	assert.Equal(t, []string{"k", "sem"}, keys)
	end := a.apply(t, Command{Op: OpSessionClose, Session: s, Waiters: []KeyWaiter{{Key: "sem", Waiter: Waiter{Owner: "q", TTL: 1000, Mode: ModePermit, Permits: 2}}}})
	require.Equal(t, Closed, end.Code)
	require.Len(t, end.Sub, 2)
	assert.Equal(t, WaiterGranted, end.Sub[1].Waiter)
	l, held := a.t.Get("k")
	require.True(t, held)
	require.Len(t, l.Shared.Holders, 1)
	assert.Equal(t, "r3", l.Shared.Holders[0].Owner)
	l, _ = a.t.Get("sem")
	assert.Equal(t, "q", l.Shared.Holders[0].Owner)
	assert.Equal(t, uint64(0), l.Shared.Holders[0].Slot)
}

func TestSharedEncoding(t *testing.T) {
	for _, c := range []Command{
		rlock("k", "o"), wlock("k", "o"), permit("k", "o", 7),
		{Op: OpRelease, Key: "k", Owner: "o", Waiter: &Waiter{Owner: "w", TTL: 5, Mode: ModePermit, Permits: 3}},
		{Op: OpSessionClose, Session: 3, Waiters: []KeyWaiter{{Key: "a", Waiter: Waiter{Owner: "w", TTL: 5}}, {Key: "b", Waiter: Waiter{Owner: "w", Session: 2, Mode: ModeRead}}}},
	} {
		b := c.Encode(nil)
		assert.Len(t, b, c.encodedLen())
		got, err := Decode(b)
		require.NoError(t, err)
		assert.Equal(t, c, got)
	}
	for _, c := range []Command{
		{Op: OpAcquire, Key: "k", Owner: "o", TTL: 5, Mode: ModePermit},
		{Op: OpAcquire, Key: "k", Owner: "o", TTL: 5, Mode: ModeRead, Permits: 2},
		{Op: OpAcquire, Key: "k", Owner: "o", TTL: 5, Mode: 9},
		{Op: OpAcquire, Key: "k", Owner: "o", TTL: 5, Mode: ModeRead, Redis: true},
		{Op: OpRelease, Key: "k", Owner: "o", Mode: ModeRead},
	} {
		_, err := Decode(c.Encode(nil))
		assert.ErrorIs(t, err, ErrBadEntry, "%+v", c)
	}
}

// Has and Peek read a key in place: Peek sees the table's own holders (Get
// copies them), and nil for a key that is not there.
func TestHasAndPeek(t *testing.T) {
	a := newApplier()
	assert.False(t, a.t.Has("k"))
	a.t.Peek("k", func(l *Lease) { assert.Nil(t, l) })
	a.apply(t, rlock("k", "r1"))
	a.apply(t, rlock("k", "r2"))
	assert.True(t, a.t.Has("k"))
	var seen []*Holder
	a.t.Peek("k", func(l *Lease) {
		require.NotNil(t, l)
		seen = l.Shared.Holders
	})
	require.Len(t, seen, 2)
	got, ok := a.t.Get("k")
	require.True(t, ok)
	assert.NotSame(t, seen[0], got.Shared.Holders[0], "Get copies the holders")
	assert.Equal(t, *seen[0], *got.Shared.Holders[0])
}

// Findings of the shared-key property tests, each reduced to a few entries.

// A batch (group commit) may hold a session open whose TTL is under 128 ms
// (the server's minimum TTL is 100 ms): its encoding is 6 bytes, 7 with its
// length, and DecodeEntry must still take the batch; it refuses it, and
// Apply panics on the committed entry on every node.
func TestBatchOfShortCommands(t *testing.T) {
	entry := EncodeEntry(nil, []Command{openSession(100), openSession(100)})
	cmds, err := DecodeEntry(entry)
	require.NoError(t, err)
	assert.Len(t, cmds, 2)
	a := newApplier()
	assert.NotPanics(t, func() { a.applyBatch(t, []Command{openSession(100), openSession(120)}) })
}

// An acquire that a waiter rides on grants both at the entry's one
// position: two readers (or two permits) that hold together with the same
// token. Every grant must have a token of its own.
func TestSharedAcquireWithWaiterGivesOneToken(t *testing.T) {
	for _, mode := range []Mode{ModeRead, ModePermit} {
		a := newApplier()
		c := rlock("k", "r1")
		c.Mode, c.Waiter = mode, &Waiter{Owner: "r2", TTL: 1000, Mode: mode}
		if mode == ModePermit {
			c.Permits, c.Waiter.Permits = 3, 3
		}
		a.apply(t, c)
		l, held := a.t.Get("k")
		require.True(t, held)
		tokens := map[uint64]string{}
		for _, h := range l.Shared.Holders {
			if other, dup := tokens[h.Token]; dup {
				t.Errorf("%s: %s and %s hold together with token %d", mode, other, h.Owner, h.Token)
			}
			tokens[h.Token] = h.Owner
		}
	}
}

// An extend that names a holder the leader saw run out (Command.Lease)
// ends it first, as it does a plain lock's lease: the extend then finds no
// holder. A shared key's extend ignores the ref and renews the holder.
func TestSharedExtendEndsAHolderThatRanOut(t *testing.T) {
	for _, plain := range []bool{true, false} {
		a := newApplier()
		c := permit("k", "p", 2)
		if plain {
			c = acquire("k", "p", 1000)
		}
		g := a.apply(t, c)
		require.Equal(t, Granted, g.Code)
		ref := LeaseRef{Token: g.Position, Version: g.Position}
		r := a.apply(t, Command{Op: OpExtend, Key: "k", Owner: "p", TTL: 1000, Lease: &ref})
		assert.Equal(t, NotHolder, r.Code, "plain %v", plain)
		if assert.NotNil(t, r.Freed, "plain %v", plain) {
			assert.Equal(t, ref.Token, r.Freed.Token)
		}
		_, held := a.t.Get("k")
		assert.False(t, held, "plain %v", plain)
	}
}
