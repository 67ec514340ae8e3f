package fsm

import (
	"bytes"
	"io"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// applier feeds commands to a table at increasing indices, encoded as raft
// log entries exactly as the server sends them.
type applier struct {
	t     *Table
	index uint64
}

func newApplier() *applier { return &applier{t: New()} }

func (a *applier) apply(tb testing.TB, c Command) *Result {
	tb.Helper()
	a.index++
	res := a.t.Apply(&raft.Log{Index: a.index, Type: raft.LogCommand, Data: c.Encode(nil)})
	r, ok := res.(*Result)
	require.True(tb, ok, "Apply returned %T", res)
	return r
}

// applyBatch applies cmds as one entry and returns their results.
func (a *applier) applyBatch(tb testing.TB, cmds []Command) []*Result {
	tb.Helper()
	a.index++
	res := a.t.Apply(&raft.Log{Index: a.index, Type: raft.LogCommand, Data: EncodeEntry(nil, cmds)})
	if len(cmds) == 1 {
		r, ok := res.(*Result)
		require.True(tb, ok, "Apply returned %T", res)
		return []*Result{r}
	}
	rs, ok := res.([]*Result)
	require.True(tb, ok, "Apply returned %T", res)
	require.Len(tb, rs, len(cmds))
	return rs
}

func acquire(key, owner string, ttl uint64) Command {
	return Command{Op: OpAcquire, Key: key, Owner: owner, TTL: ttl}
}
func extend(key, owner string, ttl uint64) Command {
	return Command{Op: OpExtend, Key: key, Owner: owner, TTL: ttl}
}
func release(key, owner string) Command { return Command{Op: OpRelease, Key: key, Owner: owner} }
func expire(key string, ref LeaseRef) Command {
	return Command{Op: OpExpire, Key: key, Lease: &ref}
}

func TestCommands(t *testing.T) {
	type step struct {
		cmd       Command
		code      Code
		token     uint64 // expected token of the key's lease after the step; 0 = free
		waiterOut WaiterOutcome
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"acquire free key", []step{
			{acquire("k", "a", 1000), Granted, 1, WaiterNone},
		}},
		{"second owner is refused while held", []step{
			{acquire("k", "a", 1000), Granted, 1, 0},
			{acquire("k", "b", 1000), Held, 1, 0},
		}},
		{"same owner renews with the same token", []step{
			{acquire("k", "a", 1000), Granted, 1, 0},
			{acquire("k", "a", 5000), Renewed, 1, 0},
		}},
		{"release then another owner gets a larger token", []step{
			{acquire("k", "a", 1000), Granted, 1, 0},
			{release("k", "a"), Released, 0, 0},
			{acquire("k", "b", 1000), Granted, 3, 0},
		}},
		{"repeated release by the same owner succeeds", []step{
			{acquire("k", "a", 1000), Granted, 1, 0},
			{release("k", "a"), Released, 0, 0},
			{release("k", "a"), AlreadyReleased, 0, 0},
		}},
		{"acquire by an owner whose release is remembered is refused", []step{
			{acquire("k", "a", 1000), Granted, 1, 0},
			{release("k", "a"), Released, 0, 0},
			{acquire("k", "a", 1000), Refused, 0, 0},
		}},
		{"release by a non-holder fails", []step{
			{acquire("k", "a", 1000), Granted, 1, 0},
			{release("k", "b"), NotHolder, 1, 0},
			{release("free", "b"), NotHolder, 0, 0},
		}},
		{"extend by holder and non-holder", []step{
			{acquire("k", "a", 1000), Granted, 1, 0},
			{extend("k", "a", 2000), Extended, 1, 0},
			{extend("k", "b", 2000), NotHolder, 1, 0},
			{extend("free", "a", 2000), NotHolder, 0, 0},
		}},
		{"expire of the current lease frees it", []step{
			{acquire("k", "a", 1000), Granted, 1, 0},
			{expire("k", LeaseRef{Token: 1, Version: 1}), Expired, 0, 0},
			{acquire("k", "a", 1000), Granted, 3, 0}, // expiry is not a release
		}},
		{"expire of a renewed lease does nothing", []step{
			{acquire("k", "a", 1000), Granted, 1, 0},
			{extend("k", "a", 1000), Extended, 1, 0},
			{expire("k", LeaseRef{Token: 1, Version: 1}), Stale, 1, 0},
			{expire("k", LeaseRef{Token: 1, Version: 2}), Expired, 0, 0},
		}},
		{"expire of another grant does nothing", []step{
			{acquire("k", "a", 1000), Granted, 1, 0},
			{release("k", "a"), Released, 0, 0},
			{acquire("k", "b", 1000), Granted, 3, 0},
			{expire("k", LeaseRef{Token: 1, Version: 1}), Stale, 3, 0},
		}},
		{"release hands the lock to the attached waiter in the same entry", []step{
			{acquire("k", "a", 1000), Granted, 1, 0},
			{Command{Op: OpRelease, Key: "k", Owner: "a", Waiter: &Waiter{Owner: "w", TTL: 500}}, Released, 2, WaiterGranted},
			{release("k", "w"), Released, 0, 0},
		}},
		{"failed release keeps the waiter waiting", []step{
			{acquire("k", "a", 1000), Granted, 1, 0},
			{Command{Op: OpRelease, Key: "k", Owner: "x", Waiter: &Waiter{Owner: "w", TTL: 500}}, NotHolder, 1, WaiterNone},
		}},
		{"expiry hands the lock to the waiter", []step{
			{acquire("k", "a", 1000), Granted, 1, 0},
			{Command{Op: OpExpire, Key: "k", Lease: &LeaseRef{1, 1}, Waiter: &Waiter{Owner: "w", TTL: 500}}, Expired, 2, WaiterGranted},
		}},
		{"waiter whose release is remembered is not granted", []step{
			{acquire("k", "w", 1000), Granted, 1, 0},
			{release("k", "w"), Released, 0, 0},
			{Command{Op: OpRevoke, Key: "k", Waiter: &Waiter{Owner: "w", TTL: 500}}, Stale, 0, WaiterRefused},
		}},
		{"redis acquire by the holder is refused", []step{
			{Command{Op: OpAcquire, Key: "k", Owner: "v", TTL: 1000, Redis: true}, Granted, 1, 0},
			{Command{Op: OpAcquire, Key: "k", Owner: "v", TTL: 1000, Redis: true}, Held, 1, 0},
		}},
		{"redis release is not remembered", []step{
			{Command{Op: OpAcquire, Key: "k", Owner: "v", TTL: 1000, Redis: true}, Granted, 1, 0},
			{Command{Op: OpRelease, Key: "k", Owner: "v", Redis: true}, Released, 0, 0},
			{Command{Op: OpRelease, Key: "k", Owner: "v", Redis: true}, NotHolder, 0, 0},
			{Command{Op: OpAcquire, Key: "k", Owner: "v", TTL: 1000, Redis: true}, Granted, 4, 0},
		}},
		{"redis acquire ignores a native release memory", []step{
			{acquire("k", "v", 1000), Granted, 1, 0},
			{release("k", "v"), Released, 0, 0},
			{acquire("k", "v", 1000), Refused, 0, 0},
			{Command{Op: OpAcquire, Key: "k", Owner: "v", TTL: 1000, Redis: true}, Granted, 4, 0},
		}},
		{"grant hands a free key to the waiter", []step{
			{Command{Op: OpGrant, Key: "k", Waiter: &Waiter{Owner: "w", TTL: 500}}, Granted, 1, WaiterGranted},
			{Command{Op: OpGrant, Key: "k", Waiter: &Waiter{Owner: "v", TTL: 500}}, Held, 1, WaiterNone},
		}},
		{"acquire may first end a lease the leader saw run out", []step{
			{acquire("k", "a", 1000), Granted, 1, 0},
			{Command{Op: OpAcquire, Key: "k", Owner: "b", TTL: 1000, Lease: &LeaseRef{1, 1}}, Granted, 2, 0},
		}},
		{"acquire's expiry prefix does nothing to a renewed lease", []step{
			{acquire("k", "a", 1000), Granted, 1, 0},
			{extend("k", "a", 1000), Extended, 1, 0},
			{Command{Op: OpAcquire, Key: "k", Owner: "b", TTL: 1000, Lease: &LeaseRef{1, 1}}, Held, 1, 0},
		}},
		{"extend of a lease that ran out fails", []step{
			{acquire("k", "a", 1000), Granted, 1, 0},
			{Command{Op: OpExtend, Key: "k", Owner: "a", TTL: 1000, Lease: &LeaseRef{1, 1}}, NotHolder, 0, 0},
		}},
		{"revoke frees any holder", []step{
			{acquire("k", "a", 1000), Granted, 1, 0},
			{Command{Op: OpRevoke, Key: "k"}, Revoked, 0, 0},
			{acquire("k", "a", 1000), Granted, 3, 0}, // a revoke is not a release
		}},
		{"revoke by owner and token frees only that grant", []step{
			{acquire("k", "a", 1000), Granted, 1, 0},
			{Command{Op: OpRevoke, Key: "k", Owner: "a", Lease: &LeaseRef{Token: 7}}, Stale, 1, 0},
			{Command{Op: OpRevoke, Key: "k", Owner: "b", Lease: &LeaseRef{Token: 1}}, Stale, 1, 0},
			{Command{Op: OpRevoke, Key: "k", Owner: "a", Lease: &LeaseRef{Token: 1}}, Revoked, 0, 0},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := newApplier()
			for i, s := range tc.steps {
				r := a.apply(t, s.cmd)
				assert.Equal(t, s.code, r.Code, "step %d (%s) code", i, s.cmd.Op)
				assert.Equal(t, s.token, r.Lease.Token, "step %d (%s) token", i, s.cmd.Op)
				assert.Equal(t, s.waiterOut, r.Waiter, "step %d (%s) waiter", i, s.cmd.Op)
				l, held := a.t.Get(s.cmd.Key)
				assert.Equal(t, s.token != 0, held, "step %d held", i)
				assert.Equal(t, s.token, l.Token, "step %d Get token", i)
			}
		})
	}
}

func TestRenewalUpdatesVersionAndTTL(t *testing.T) {
	a := newApplier()
	a.apply(t, acquire("k", "a", 1000))
	r := a.apply(t, extend("k", "a", 7000))
	assert.Equal(t, Lease{Owner: "a", Token: 1, TTL: 7000, Version: 2, Mod: 2}, r.Lease)
	r = a.apply(t, acquire("k", "a", 3000))
	assert.Equal(t, Lease{Owner: "a", Token: 1, TTL: 3000, Version: 3, Mod: 3}, r.Lease)
}

func TestFreedReportsTheEndedLease(t *testing.T) {
	a := newApplier()
	a.apply(t, acquire("k", "a", 1000))
	r := a.apply(t, release("k", "a"))
	require.NotNil(t, r.Freed)
	assert.Equal(t, Lease{Owner: "a", Token: 1, TTL: 1000, Version: 1, Mod: 1}, *r.Freed)
	r = a.apply(t, release("k", "a"))
	assert.Nil(t, r.Freed)
}

func TestReleaseMemoryIsForgottenByLogPosition(t *testing.T) {
	t.Run("window", func(t *testing.T) {
		a := newApplier()
		a.t.memWindow = 10
		a.apply(t, acquire("k", "a", 1000))
		a.apply(t, release("k", "a")) // position 2
		for a.index < 11 {
			a.apply(t, acquire("other", "x", 1000))
		}
		// position 12 = 2 + window: forgotten when it is applied.
		assert.Equal(t, Refused, a.apply(t, acquire("k", "a", 1000)).Code, "index 12: still remembered before the entry")
		assert.Equal(t, Granted, a.apply(t, acquire("k", "a", 1000)).Code, "index 13: forgotten")
	})
	t.Run("count", func(t *testing.T) {
		a := newApplier()
		a.t.memMax = 3
		for _, k := range []string{"k1", "k2", "k3", "k4"} {
			a.apply(t, acquire(k, "a", 1000))
			a.apply(t, release(k, "a"))
		}
		assert.Equal(t, Granted, a.apply(t, acquire("k1", "a", 1000)).Code, "oldest forgotten")
		assert.Equal(t, Refused, a.apply(t, acquire("k2", "a", 1000)).Code)
		assert.Equal(t, Refused, a.apply(t, acquire("k4", "a", 1000)).Code)
	})
	t.Run("the newest releases of a key, by as many owners", func(t *testing.T) {
		a := newApplier()
		a.t.memPerKey = 3
		for _, o := range []string{"a", "b", "c", "d"} {
			a.apply(t, acquire("k", o, 1000))
			a.apply(t, release("k", o))
		}
		assert.Equal(t, NotHolder, a.apply(t, release("k", "a")).Code, "pushed out by the newer three")
		for _, o := range []string{"b", "c", "d"} {
			assert.Equal(t, AlreadyReleased, a.apply(t, release("k", o)).Code, o)
		}
		assert.Equal(t, Refused, a.apply(t, acquire("k", "d", 1000)).Code, "the newest release's owner")
	})
	t.Run("every owner's release of a key is remembered", func(t *testing.T) {
		a := newApplier()
		a.t.memWindow = 10
		a.apply(t, acquire("k", "a", 1000))
		a.apply(t, release("k", "a")) // position 2
		a.apply(t, acquire("k", "b", 1000))
		a.apply(t, release("k", "b")) // position 4; a's is still remembered
		assert.Equal(t, AlreadyReleased, a.apply(t, release("k", "a")).Code)
		assert.Equal(t, AlreadyReleased, a.apply(t, release("k", "b")).Code)
		assert.Equal(t, Refused, a.apply(t, acquire("k", "b", 1000)).Code, "the newest release's owner")
		// a's release is older than b's grant: a's acquire is its next
		// attempt, not a delayed duplicate that brings back a lock nobody
		// took after it.
		assert.Equal(t, Granted, a.apply(t, acquire("k", "a", 1000)).Code)
		assert.Equal(t, Released, a.apply(t, release("k", "a")).Code) // position 9
		for a.index < 14 {
			a.apply(t, acquire("other", "x", 1000))
		}
		// position 14 forgot b's (4 + window), not a's (9).
		assert.Equal(t, NotHolder, a.apply(t, release("k", "b")).Code, "b's forgotten")
		assert.Equal(t, AlreadyReleased, a.apply(t, release("k", "a")).Code)
		assert.Equal(t, Refused, a.apply(t, acquire("k", "a", 1000)).Code)
	})
}

func TestNonCommandEntriesAreIgnored(t *testing.T) {
	tb := New()
	assert.Nil(t, tb.Apply(&raft.Log{Index: 1, Type: raft.LogNoop}))
	assert.Nil(t, tb.Apply(&raft.Log{Index: 2, Type: raft.LogConfiguration}))
}

func TestUndecodableEntryPanicsWithIndex(t *testing.T) {
	tb := New()
	assert.PanicsWithValue(t, "fsm: undecodable entry at index 9: fsm: unknown entry encoding version 7",
		func() { tb.Apply(&raft.Log{Index: 9, Type: raft.LogCommand, Data: []byte{7, 1}}) })
}

func TestIndexMustIncrease(t *testing.T) {
	tb := New()
	tb.ApplyCommand(5, acquire("k", "a", 1))
	assert.Panics(t, func() { tb.ApplyCommand(5, acquire("j", "a", 1)) })
}

func TestMembers(t *testing.T) {
	a := newApplier()
	r := a.apply(t, Command{Op: OpMember, Key: "n1", Owner: "127.0.0.1:7379"})
	assert.Equal(t, Recorded, r.Code)
	a.apply(t, Command{Op: OpMember, Key: "n2", Owner: "127.0.0.1:7479"})
	a.apply(t, Command{Op: OpMember, Key: "n1", Owner: "127.0.0.1:7000"})
	assert.Equal(t, map[string]string{"n1": "127.0.0.1:7000", "n2": "127.0.0.1:7479"}, a.t.Members())
	a.apply(t, Command{Op: OpMember, Key: "n2"})
	assert.Equal(t, map[string]string{"n1": "127.0.0.1:7000"}, a.t.Members())
	// Membership entries use log positions but grant nothing.
	g := a.apply(t, acquire("k", "o", 1000))
	assert.Equal(t, uint64(5), g.Lease.Token)

	b := New()
	require.NoError(t, b.Restore(io.NopCloser(bytes.NewReader(a.t.MarshalSnapshot()))))
	assert.Equal(t, a.t.Members(), b.Members())
}
