package fsm

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
