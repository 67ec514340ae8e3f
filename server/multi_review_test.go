package server

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
