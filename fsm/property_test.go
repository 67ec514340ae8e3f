package fsm

import (
	"bytes"
	"fmt"
	"io"
	"math/rand"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// randomCommands returns a sequence of commands over few keys and owners, so
// that they collide often. Expire and revoke name leases that exist as well
// as ones that do not.
func randomCommands(rng *rand.Rand, n int) []Command {
	keys := []string{"a", "b", "c"}
	owners := []string{"o1", "o2", "o3", "o4"}
	cmds := make([]Command, 0, n)
	// Sessions opened so far: command i (from 0) is at position i+1, one
	// entry each or batched (a batch's commands take consecutive positions).
	var sessions []uint64
	session := func() uint64 {
		if len(sessions) == 0 || rng.Intn(8) == 0 {
			return uint64(rng.Intn(n) + 1) // open or not: likely not
		}
		return sessions[rng.Intn(len(sessions))]
	}
	for i := 0; i < n; i++ {
		c := Command{Key: keys[rng.Intn(len(keys))], Owner: owners[rng.Intn(len(owners))], TTL: uint64(rng.Intn(5000) + 100)}
		if rng.Intn(4) == 0 {
			cmds = append(cmds, randomSessionCommand(rng, c, keys, owners, session, &sessions, i))
			continue
		}
		switch rng.Intn(8) {
		case 0, 1:
			c.Op = OpAcquire
		case 2:
			c.Op = OpExtend
		case 3:
			c.Op = OpRelease
		case 4:
			c.Op = OpExpire
			c.Owner = ""
			c.Lease = &LeaseRef{Token: uint64(rng.Intn(i + 1)), Version: uint64(rng.Intn(i + 1))}
		case 5:
			c.Op = OpRevoke
			if rng.Intn(2) == 0 {
				c.Owner = ""
			}
		case 7:
			c.Op = OpMember
			c.Key = "n" + c.Owner
			if rng.Intn(3) == 0 {
				c.Owner = ""
			}
			cmds = append(cmds, c)
			continue
		case 6:
			c.Op = OpGrant
			c.Owner = ""
			c.Waiter = &Waiter{Owner: owners[rng.Intn(len(owners))], TTL: 1000}
		}
		c.Redis = (c.Op == OpAcquire || c.Op == OpRelease) && rng.Intn(3) == 0
		if c.Waiter == nil && rng.Intn(4) == 0 {
			c.Waiter = &Waiter{Owner: owners[rng.Intn(len(owners))], TTL: 1000}
		}
		cmds = append(cmds, c)
	}
	return cmds
}

// randomSessionCommand returns a session command, or an acquire, release
// or proclaim under a session, or a command with a waiter under one.
func randomSessionCommand(rng *rand.Rand, c Command, keys, owners []string, session func() uint64, opened *[]uint64, i int) Command {
	waiter := func() *Waiter {
		w := &Waiter{Owner: owners[rng.Intn(len(owners))], Session: session()}
		if w.Session != 0 && rng.Intn(2) == 0 {
			w.Value = "wv"
		}
		return w
	}
	switch rng.Intn(10) {
	case 9:
		c.Op, c.TTL = OpPut, 0 // a Redis SET over whatever the key holds
	case 0, 1:
		*opened = append(*opened, uint64(i+1))
		return Command{Op: OpSessionOpen, TTL: c.TTL}
	case 2, 3:
		c.Op, c.TTL, c.Session = OpAcquire, 0, session()
		if rng.Intn(2) == 0 {
			c.Data = "v" + c.Owner
		}
	case 4:
		c.Op, c.TTL, c.Session = OpRelease, 0, session()
		if rng.Intn(2) == 0 {
			c.Waiter = waiter()
		}
	case 5:
		c.Op, c.TTL, c.Session, c.Data = OpProclaim, 0, session(), "p"+c.Owner
	case 6:
		c.Op, c.Owner, c.TTL = OpGrant, "", 0
		c.Waiter = waiter()
	default:
		ops := []Op{OpSessionRenew, OpSessionClose, OpSessionExpire, OpSessionRevoke}
		c = Command{Op: ops[rng.Intn(len(ops))], Session: session()}
		if c.Op == OpSessionExpire {
			v := c.Session
			if rng.Intn(2) == 0 {
				v = uint64(rng.Intn(i + 1))
			}
			c.Lease = &LeaseRef{Version: v}
		}
		if c.Op != OpSessionRenew {
			for _, k := range keys {
				if rng.Intn(2) == 0 {
					w := *waiter()
					if w.Session == 0 {
						w.TTL, w.Value = 1000, ""
					}
					c.Waiters = append(c.Waiters, KeyWaiter{Key: k, Waiter: w})
				}
			}
		}
	}
	return c
}

// TestPropertyTokensAndExclusion applies random command sequences and checks,
// after every entry, that each key has at most one holder, that a new grant's
// token is larger than every earlier grant's on that key, and that a renewal
// keeps its token.
func TestPropertyTokensAndExclusion(t *testing.T) {
	for seed := int64(1); seed <= 200; seed++ {
		rng := rand.New(rand.NewSource(seed))
		a := newApplier()
		lastGrant := map[string]uint64{}
		holder := map[string]Lease{}
		for i, c := range randomCommands(rng, 300) {
			r := a.apply(t, c)
			if !c.Op.IsSession() {
				l, held := a.t.Get(c.Key)
				require.Equal(t, held, r.Lease.Token != 0, "seed %d step %d", seed, i)
				_ = l
			}
			// Every session lists exactly the keys held under it.
			for id, s := range a.t.sessions {
				for k := range s.keys {
					l := a.t.locks[k]
					require.True(t, l != nil && l.Session == id, "seed %d step %d: session %d lists %q, held by %+v", seed, i, id, k, l)
				}
			}
			for k, l := range a.t.locks {
				if l.Session != 0 {
					_, listed := a.t.sessions[l.Session].keys[k]
					require.True(t, listed, "seed %d step %d: %q held under session %d, which does not list it", seed, i, k, l.Session)
				}
			}
			// Every key's holder: what changed must be what this entry
			// did (r, or for a session's end one of r.Sub).
			for _, key := range []string{"a", "b", "c"} {
				l, held := a.t.Get(key)
				prev, wasHeld := holder[key]
				freed, at := r.Freed, r.Position
				for _, s := range r.Sub {
					if s.Cmd.Key == key {
						freed, at = s.Freed, s.Position
					}
				}
				if !held {
					if wasHeld {
						require.True(t, c.Key == key || c.Op.IsSession(), "seed %d step %d: %s freed by a command on %q", seed, i, key, c.Key)
					}
					delete(holder, key)
					continue
				}
				if l.Session != 0 {
					_, open := a.t.Session(l.Session)
					require.True(t, open, "seed %d step %d: %s held under session %d, which is not open", seed, i, key, l.Session)
				}
				if !wasHeld || prev.Token != l.Token {
					require.Greater(t, l.Token, lastGrant[key], "seed %d step %d: token went back", seed, i)
					require.Equal(t, at, l.Token, "seed %d step %d: token is the command's position", seed, i)
					lastGrant[key] = l.Token
					// A grant to a different owner while the earlier lease is
					// current would be two holders: the entry must have ended it.
					// (A put, Redis's SET, overwrites whoever holds the key:
					// owner-less writes are outside mutual exclusion.)
					if wasHeld && c.Op != OpPut {
						require.NotNil(t, freed, "seed %d step %d: %s granted to %s while %s held it", seed, i, key, l.Owner, prev.Owner)
						require.Equal(t, prev.Token, freed.Token, "seed %d step %d", seed, i)
					}
				} else {
					require.Equal(t, prev.Owner, l.Owner, "seed %d step %d: same token, different owner", seed, i)
					require.Equal(t, prev.Session, l.Session, "seed %d step %d: same token, different session", seed, i)
				}
				holder[key] = l
			}
		}
	}
}

// TestBatchesActAsSeparateEntries applies the same commands one per entry and
// in random batches (group commit): every command's result is the same either
// way (position and token included, as a batch's commands take consecutive
// positions), and so is the table.
func TestBatchesActAsSeparateEntries(t *testing.T) {
	for seed := int64(1); seed <= 200; seed++ {
		rng := rand.New(rand.NewSource(seed))
		cmds := randomCommands(rng, 300)
		single, batched := newApplier(), newApplier()
		single.t.memMax, batched.t.memMax = 3, 3 // exercise forgetting
		var want []*Result
		for _, c := range cmds {
			want = append(want, single.apply(t, c))
		}
		var got []*Result
		var lastPos uint64
		for rest := cmds; len(rest) > 0; {
			n := min(len(rest), 1+rng.Intn(6))
			rs := batched.applyBatch(t, rest[:n])
			for _, r := range rs {
				require.Greater(t, r.Position, lastPos, "seed %d: positions grow within and across entries", seed)
				lastPos = r.Position
			}
			got = append(got, rs...)
			rest = rest[n:]
		}
		require.Equal(t, want, got, "seed %d", seed)
		require.Equal(t, single.t.maxToken, batched.t.maxToken, "seed %d", seed)
		require.Less(t, batched.t.LastIndex(), single.t.LastIndex(), "seed %d: fewer entries", seed)
		require.Equal(t, single.t.floor+single.t.LastIndex(), batched.t.floor+batched.t.LastIndex(), "seed %d", seed)
		locks := func(tb *Table) map[string]Lease {
			m := map[string]Lease{}
			tb.Range(func(k string, l Lease) { m[k] = l })
			return m
		}
		require.Equal(t, locks(single.t), locks(batched.t), "seed %d", seed)

		// The batched table's snapshot restores and goes on granting above
		// every token it issued.
		again := New()
		require.NoError(t, again.Restore(io.NopCloser(bytes.NewReader(batched.t.MarshalSnapshot()))), "seed %d", seed)
		r := again.ApplyCommand(again.LastIndex()+1, Command{Op: OpAcquire, Key: "fresh", Owner: "o", TTL: 1000})
		require.Equal(t, Granted, r.Code)
		require.Greater(t, r.Lease.Token, batched.t.MaxToken(), "seed %d", seed)
	}
}

func TestDeterminism(t *testing.T) {
	for seed := int64(1); seed <= 50; seed++ {
		cmds := randomCommands(rand.New(rand.NewSource(seed)), 500)
		a, b := newApplier(), newApplier()
		a.t.memMax, b.t.memMax = 2, 2 // exercise forgetting
		for _, c := range cmds {
			a.apply(t, c)
			b.apply(t, c)
		}
		require.Equal(t, a.t.MarshalSnapshot(), b.t.MarshalSnapshot(), "seed %d", seed)
	}
}

// memSink is a raft.SnapshotSink over a buffer.
type memSink struct {
	bytes.Buffer
	cancelled, closed bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }
func (s *memSink) Close() error  { s.closed = true; return nil }

func TestSnapshotRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	cmds := randomCommands(rng, 1000)
	a := newApplier()
	for _, c := range cmds[:600] {
		a.apply(t, c)
	}
	snap, err := a.t.Snapshot()
	require.NoError(t, err)
	var sink memSink
	require.NoError(t, snap.Persist(&sink))
	assert.True(t, sink.closed)
	assert.Equal(t, a.t.MarshalSnapshot(), sink.Bytes(), "Persist and MarshalSnapshot agree")

	b := newApplier()
	b.apply(t, acquire("junk", "x", 1)) // Restore must discard this
	require.NoError(t, b.t.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))))
	_, junk := b.t.Get("junk")
	assert.False(t, junk, "restore replaces everything")
	assert.Equal(t, a.t.MarshalSnapshot(), b.t.MarshalSnapshot())
	assert.Equal(t, a.t.MaxToken(), b.t.MaxToken())
	assert.Equal(t, a.t.LastIndex(), b.t.LastIndex())

	// Both go on identically, release memory included.
	b.index = a.index
	for _, c := range cmds[600:] {
		ra, rb := a.apply(t, c), b.apply(t, c)
		require.Equal(t, ra.Code, rb.Code)
		require.Equal(t, ra.Lease, rb.Lease)
	}
	assert.Equal(t, a.t.MarshalSnapshot(), b.t.MarshalSnapshot())
}

func TestRestoreRejectsCorruptSnapshots(t *testing.T) {
	a := newApplier()
	a.apply(t, acquire("k", "a", 1000))
	a.apply(t, acquire("j", "a", 1000))
	a.apply(t, release("j", "a"))
	good := a.t.MarshalSnapshot()
	for i := 0; i < len(good); i++ {
		bad := append([]byte(nil), good[:i]...)
		err := New().Restore(io.NopCloser(bytes.NewReader(bad)))
		require.ErrorIs(t, err, ErrBadSnapshot, "truncated at %d", i)
	}
	err := New().Restore(io.NopCloser(bytes.NewReader(append(good, 0))))
	assert.ErrorIs(t, err, ErrBadSnapshot)
}

func TestPersistCancelsOnWriteError(t *testing.T) {
	a := newApplier()
	a.apply(t, acquire("k", "a", 1000))
	snap, err := a.t.Snapshot()
	require.NoError(t, err)
	sink := &failingSink{}
	require.Error(t, snap.Persist(sink))
	assert.True(t, sink.cancelled)
}

type failingSink struct{ memSink }

func (s *failingSink) Write([]byte) (int, error) { return 0, fmt.Errorf("disk full") }

var _ raft.SnapshotSink = (*failingSink)(nil)
