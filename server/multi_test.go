package server

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAcquireManyAllOrNothing(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := ctxT(t)
	mustAcquire(t, n, "b", "other", 10*time.Second)
	_, ok, err := n.AcquireMany(ctx, MultiAcquire{Keys: []string{"a", "b", "c"}, Owner: "me", TTL: 10 * time.Second})
	require.NoError(t, err)
	assert.False(t, ok)
	_, held, _ := n.Status(ctx, "a")
	assert.False(t, held, "nothing granted")

	// A waiting multi-key acquire keeps "a" and "c" once first there: a later
	// single-key acquire of "a" queues behind it.
	type res struct {
		g   Grant
		ok  bool
		err error
	}
	mch := make(chan res, 1)
	go func() {
		g, ok, err := n.AcquireMany(ctx, MultiAcquire{Keys: []string{"c", "a", "b"}, Owner: "me", TTL: 10 * time.Second, Wait: 10 * time.Second})
		mch <- res{g, ok, err}
	}()
	require.Eventually(t, func() bool { return n.grants.waiting() == 3 }, 5*time.Second, 5*time.Millisecond)
	_, ok, err = n.Acquire(ctx, "a", "late", 10*time.Second, 0)
	require.NoError(t, err)
	assert.False(t, ok, "a later acquire does not pass the multi-key waiter")
	sch := make(chan res, 1)
	go func() {
		g, ok, err := n.Acquire(ctx, "a", "late", 10*time.Second, 10*time.Second)
		sch <- res{g, ok, err}
	}()
	require.Eventually(t, func() bool { return n.grants.waiting() == 4 }, 5*time.Second, 5*time.Millisecond)
	ok, err = n.Release(ctx, "b", "other")
	require.NoError(t, err)
	require.True(t, ok)
	m := <-mch
	require.NoError(t, m.err)
	require.True(t, m.ok)
	for _, k := range []string{"a", "b", "c"} {
		s := mustStatus(t, n, k)
		assert.Equal(t, "me", s.Owner)
		assert.Equal(t, m.g.Token, s.Token, "one token for the set")
	}
	// Retry renews with the same token.
	again, ok, err := n.AcquireMany(ctx, MultiAcquire{Keys: []string{"a", "b", "c"}, Owner: "me", TTL: 10 * time.Second})
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, m.g.Token, again.Token)
	ext, err := n.ExtendMany(ctx, []string{"a", "b", "c"}, "me", 10*time.Second)
	require.NoError(t, err)
	assert.Equal(t, 3, ext)
	rel, err := n.ReleaseMany(ctx, []string{"a", "b", "c"}, "me", 0)
	require.NoError(t, err)
	assert.Equal(t, 3, rel)
	s := <-sch
	require.NoError(t, s.err)
	require.True(t, s.ok, "the single-key waiter got a in the release's entry")
	assert.Greater(t, s.g.Token, m.g.Token)
}

// Two multi-key waits for the same keys in opposite orders, and single-key
// holders freeing them one by one: both are granted, one after the other.
func TestAcquireManyOppositeOrdersDoNotDeadlock(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := ctxT(t)
	mustAcquire(t, n, "x", "h1", 10*time.Second)
	mustAcquire(t, n, "y", "h2", 10*time.Second)
	done := make(chan error, 2)
	for _, o := range []struct {
		owner string
		keys  []string
	}{{"p", []string{"x", "y"}}, {"q", []string{"y", "x"}}} {
		go func() {
			_, ok, err := n.AcquireMany(ctx, MultiAcquire{Keys: o.keys, Owner: o.owner, TTL: 10 * time.Second, Wait: 10 * time.Second})
			if err == nil && ok {
				_, err = n.ReleaseMany(ctx, o.keys, o.owner, 0)
			}
			if err == nil && !ok {
				err = assert.AnError
			}
			done <- err
		}()
	}
	require.Eventually(t, func() bool { return n.grants.waiting() == 4 }, 5*time.Second, 5*time.Millisecond)
	_, err := n.Release(ctx, "y", "h2")
	require.NoError(t, err)
	_, err = n.Release(ctx, "x", "h1")
	require.NoError(t, err)
	for range 2 {
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(5 * time.Second):
			t.Fatal("multi-key waiters deadlocked")
		}
	}
}

// A woken multi-key waiter proposes its transaction (marking its keys
// granting); the node loses readiness before the result returns (failAll
// empties the queues), then is ready again. The marks must not outlive the
// transaction: later acquires of the key, at once or waiting, are served.
// (A regression test of the review of issue 20.)
func TestMultiGrantingMarksEndWithTheirTransaction(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := ctxT(t)
	mustAcquire(t, n, "x", "P", 10*time.Second)
	m := &waiter{keys: []string{"x"}, key: "x", owner: "m",
		done: make(chan waitOutcome, 1), wake: make(chan struct{}, 1)}
	queued := false
	step := n.grants.planMany(m, true, &queued)
	require.Equal(t, actQueue, step.act)
	ok, err := n.Release(ctx, "x", "P")
	require.NoError(t, err)
	require.True(t, ok)
	select {
	case <-m.wake:
	case <-time.After(5 * time.Second):
		t.Fatal("not woken")
	}
	step = n.grants.planMany(m, true, &queued)
	require.Equal(t, actPropose, step.act)
	n.grants.notReady() // readiness lost while the txn is in flight
	_, _ = n.propose(ctx, step.cmd)
	n.grants.grantedMany(m)
	n.grants.withdrawMany(m)
	require.True(t, n.grants.becomeReady(n.raft.CurrentTerm(), true))
	_, _ = n.Release(ctx, "x", "m")
	_, held, err := n.Status(ctx, "x")
	require.NoError(t, err)
	require.False(t, held)

	_, ok, err = n.AcquireMany(ctx, MultiAcquire{Keys: []string{"x"}, Owner: "z", TTL: 10 * time.Second})
	require.NoError(t, err)
	require.True(t, ok, "a free key with no waiters is granted")
	go func() {
		time.Sleep(100 * time.Millisecond)
		_, _ = n.Release(ctx, "x", "z")
	}()
	_, ok, err = n.AcquireMany(ctx, MultiAcquire{Keys: []string{"x"}, Owner: "z2", TTL: 10 * time.Second, Wait: 5 * time.Second})
	require.NoError(t, err)
	assert.True(t, ok, "a wait for the key is woken when it is released")
}

// Several keys at once under a session are refused with a clear error (a
// transaction's commands carry no session part, so such an entry would not
// decode on any node), and nothing is taken. MultiAcquire has no session
// at all; FENCE.MACQUIRE ... SESSION is refused by the bridge.
func TestReleaseManyRefusesASession(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := ctxT(t)
	s, err := n.OpenSession(ctx, 10*time.Second, "")
	require.NoError(t, err)
	_, err = n.ReleaseMany(ctx, []string{"a", "b"}, "o", s)
	require.ErrorIs(t, err, ErrInvalidArgument)
	for _, k := range []string{"a", "b"} {
		_, held, err := n.Status(ctx, k)
		require.NoError(t, err)
		assert.False(t, held, k)
	}
	// The node still serves both.
	_, ok, err := n.AcquireMany(ctx, MultiAcquire{Keys: []string{"a", "b"}, Owner: "o", TTL: 10 * time.Second})
	require.NoError(t, err)
	assert.True(t, ok)
}

// ReleaseMany without a session while a session's acquire waits for one of
// the keys: the transaction must not carry that waiter (a transaction's
// commands carry no session part); the key still reaches it, by the grant
// the leader proposes for a free key someone waits for. (Review of issue 20.)
func TestReleaseManyHandsToASessionWaiter(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := ctxT(t)
	mustAcquire(t, n, "a", "o", 10*time.Second)
	s, err := n.OpenSession(ctx, 10*time.Second, "")
	require.NoError(t, err)
	type res struct {
		ok  bool
		err error
	}
	ch := make(chan res, 1)
	go func() {
		_, ok, err := n.AcquireInSession(ctx, s, "a", "w", "", 5*time.Second)
		ch <- res{ok, err}
	}()
	require.Eventually(t, func() bool { return n.grants.waiting() == 1 }, 5*time.Second, 5*time.Millisecond)
	c, err := n.ReleaseMany(ctx, []string{"a"}, "o", 0)
	require.NoError(t, err)
	assert.Equal(t, 1, c)
	r := <-ch
	require.NoError(t, r.err)
	assert.True(t, r.ok, "the session's waiter gets the key")
	hs, err := n.Holders(ctx, "a")
	require.NoError(t, err)
	require.Len(t, hs, 1)
	assert.Equal(t, s, hs[0].Session)
}

// A newer wait for the same keys by the same owner (a client's next round)
// takes the older one's place in every queue, which is answered null at
// once: it is still served before a single-key waiter that came between.
func TestMultiWaitTakesTheOlderWaitsPlace(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := ctxT(t)
	mustAcquire(t, n, "a", "x", 10*time.Second)
	type res struct {
		g   Grant
		ok  bool
		err error
		at  time.Time
	}
	many := func(keys ...string) <-chan res {
		ch := make(chan res, 1)
		go func() {
			g, ok, err := n.AcquireMany(ctx, MultiAcquire{Keys: keys, Owner: "o", TTL: 10 * time.Second, Wait: 10 * time.Second})
			ch <- res{g, ok, err, time.Now()}
		}()
		return ch
	}
	older := many("a", "b")
	// waiting counts places in queues: the set has one in each key's.
	require.Eventually(t, func() bool { return n.grants.waiting() == 2 }, 5*time.Second, 5*time.Millisecond)
	single := make(chan res, 1)
	go func() {
		g, ok, err := n.Acquire(ctx, "b", "s", 10*time.Second, 10*time.Second)
		single <- res{g, ok, err, time.Now()}
	}()
	require.Eventually(t, func() bool { return n.grants.waiting() == 3 }, 5*time.Second, 5*time.Millisecond)
	newer := many("b", "a") // the same set, named in another order
	select {
	case r := <-older:
		require.NoError(t, r.err)
		assert.False(t, r.ok, "the older wait is answered null")
	case <-time.After(5 * time.Second):
		t.Fatal("the older wait was not answered when the newer took its place")
	}
	assert.Equal(t, 3, n.grants.waiting(), "the set's places and the single waiter's, no more")
	ok, err := n.Release(ctx, "a", "x")
	require.NoError(t, err)
	require.True(t, ok)
	r := <-newer
	require.NoError(t, r.err)
	require.True(t, r.ok, "the newer wait, in the older one's place, is granted first")
	select {
	case s := <-single:
		t.Fatalf("the single-key waiter got b (granted %v) while the set held it", s.ok)
	case <-time.After(200 * time.Millisecond):
	}
	released, err := n.ReleaseMany(ctx, []string{"a", "b"}, "o", 0)
	require.NoError(t, err)
	assert.Equal(t, 2, released)
	s := <-single
	require.NoError(t, s.err)
	assert.True(t, s.ok)
	assert.Greater(t, s.g.Token, r.g.Token)
}

// Review of 6d4a165 (addMany / overlapping AcquireAll rounds): a checked
// interleaving, which holds (a regression test, not a failure).
//
// The client overlaps AcquireAll rounds and, after a grant, leaves the other
// rounds running ("a round still in flight can only renew the same lease",
// client/wait.go). A newer round that reaches the leader while the older
// round's transaction is in flight (its keys marked granting) neither takes
// its place (addMany skips a waiter with marks) nor renews (the keys are not
// held yet): it is queued behind it, and stays queued, first in every queue,
// after the older round is granted and returns. When the owner releases the
// set, it is woken; what keeps it from taking the keys again, for a caller
// that stopped reading its rounds, is only the release memory
// (planMany's Remembered check refuses it).
func TestReviewNewerMultiRoundQueuedDuringGrantIsNotGrantedAfterRelease(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := ctxT(t)
	const ttl = 10 * time.Second
	mustAcquire(t, n, "a", "x", ttl)

	// Round 1 of owner o's AcquireMany(a, b), step by step as AcquireMany
	// runs it: queued, woken by the release of a, then its transaction
	// planned (keys marked granting) but not yet committed.
	m1 := &waiter{keys: []string{"a", "b"}, key: "a", owner: "o", ttl: uint64(ttl / time.Millisecond),
		done: make(chan waitOutcome, 1), wake: make(chan struct{}, 1)}
	q1 := false
	require.Equal(t, actQueue, n.grants.planMany(m1, true, &q1).act)
	ok, err := n.Release(ctx, "a", "x")
	require.NoError(t, err)
	require.True(t, ok)
	select {
	case <-m1.wake:
	case <-time.After(5 * time.Second):
		t.Fatal("round 1 not woken")
	}
	step := n.grants.planMany(m1, true, &q1)
	require.Equal(t, actPropose, step.act)

	// Round 2 (the client's next overlapping round, same owner and keys)
	// reaches the leader now.
	type res struct {
		g   Grant
		ok  bool
		err error
	}
	round2 := make(chan res, 1)
	go func() {
		g, ok, err := n.AcquireMany(ctx, MultiAcquire{Keys: []string{"b", "a"}, Owner: "o", TTL: ttl, Wait: 5 * time.Second})
		round2 <- res{g, ok, err}
	}()
	require.Eventually(t, func() bool { return n.grants.waiting() == 4 }, 5*time.Second, 5*time.Millisecond,
		"round 2 queued behind round 1 (round 1's marks keep it from taking its place)")

	// Round 1's transaction commits: granted; AcquireMany returns it and
	// its defer withdraws m1. The client returns this lease.
	r, err := n.propose(ctx, step.cmd)
	n.grants.grantedMany(m1)
	require.NoError(t, err)
	require.NotEmpty(t, r.Sub)
	t1 := r.Sub[0].Lease.Token
	n.grants.withdrawMany(m1)

	// The client's critical section ends: it releases the set.
	c, err := n.ReleaseMany(ctx, []string{"a", "b"}, "o", 0)
	require.NoError(t, err)
	require.Equal(t, 2, c)

	// Round 2 must not now be granted anew: a round still in flight when
	// the set was granted may only renew that grant (or end with nothing).
	select {
	case r2 := <-round2:
		require.NoError(t, r2.err)
		if r2.ok {
			assert.Equal(t, t1, r2.g.Token,
				"round 2, queued while round 1's grant was in flight, was granted a new token %d after the set (token %d) was released: a grant no caller receives", r2.g.Token, t1)
		}
	case <-time.After(6 * time.Second):
		t.Fatal("round 2 did not end")
	}
	for _, k := range []string{"a", "b"} {
		_, held, err := n.Status(ctx, k)
		require.NoError(t, err)
		assert.False(t, held, "%s is held again by o after o released the set", k)
	}
}
