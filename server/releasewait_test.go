package server

import (
	"context"
	"testing"
	"time"

	"github.com/fencerlock/fencer/fsm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A release by an owner that holds nothing yet (it gave up waiting, or its
// acquire is still on its way) means "nothing more for me": nothing on the
// key is granted to that owner after it (issue: release before grant).

type acquired struct {
	g   Grant
	ok  bool
	err error
}

// answeredWithin waits up to d for ch's answer.
func answeredWithin(t *testing.T, ch <-chan acquired, d time.Duration, what string) acquired {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(d):
		t.Fatalf("%s: still waiting after %v", what, d)
	}
	return acquired{}
}

func waitingFor(t *testing.T, n *Node, count int) {
	t.Helper()
	require.Eventually(t, func() bool { return n.grants.waiting() == count }, 5*time.Second, 5*time.Millisecond)
}

// (a) An owner's queued wait is answered "not granted" by its release, and
// the holder's release then does not hand the lock to it.
func TestReleaseDropsOwnersQueuedWait(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := ctxT(t)
	mustAcquire(t, n, "k", "holder", 10*time.Second)
	ch := make(chan acquired, 1)
	go func() {
		g, ok, err := n.Acquire(ctx, "k", "quitter", 10*time.Second, 8*time.Second)
		ch <- acquired{g, ok, err}
	}()
	waitingFor(t, n, 1)
	released, err := n.Release(ctx, "k", "quitter")
	require.NoError(t, err)
	assert.False(t, released, "quitter held nothing to release")
	a := answeredWithin(t, ch, 2*time.Second, "the quitter's wait after its release")
	require.NoError(t, a.err)
	assert.False(t, a.ok, "the quitter's wait was granted")
	assert.Zero(t, n.grants.waiting(), "the quitter's wait left the queue")

	released, err = n.Release(ctx, "k", "holder")
	require.NoError(t, err)
	require.True(t, released)
	_, held, err := n.Status(ctx, "k")
	require.NoError(t, err)
	assert.False(t, held, "the lock went to someone after the holder's release")
}

// (a) The quitter's wait round reaches the queue only after its release (it
// was in flight on another connection): the hand-off of the holder's
// release is refused to it, in the log, and the wait answered null.
func TestReleaseRefusesLaterWaitRoundOfTheOwner(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := ctxT(t)
	mustAcquire(t, n, "k", "holder", 10*time.Second)
	released, err := n.Release(ctx, "k", "quitter")
	require.NoError(t, err)
	assert.False(t, released)
	ch := make(chan acquired, 1)
	go func() {
		g, ok, err := n.Acquire(ctx, "k", "quitter", 10*time.Second, 8*time.Second)
		ch <- acquired{g, ok, err}
	}()
	select {
	case a := <-ch:
		// Refused at once is as good: nothing was granted.
		require.NoError(t, a.err)
		require.False(t, a.ok, "granted to the owner after its release")
		return
	case <-time.After(200 * time.Millisecond):
	}
	waitingFor(t, n, 1)
	released, err = n.Release(ctx, "k", "holder")
	require.NoError(t, err)
	require.True(t, released)
	a := answeredWithin(t, ch, 2*time.Second, "the late wait round")
	require.NoError(t, a.err)
	assert.False(t, a.ok, "the lock was handed to the owner after its release")
	s, held, err := n.Status(ctx, "k")
	require.NoError(t, err)
	if held {
		assert.NotEqual(t, "quitter", s.Owner)
	}
	// Others are not blocked.
	mustAcquire(t, n, "k", "next", time.Second)
}

// (b) The same for a read lock and a semaphore's permit: the queued wait is
// answered "not granted" by the owner's release, and the room the holder's
// release makes is not given to it.
func TestReleaseDropsOwnersQueuedSharedWait(t *testing.T) {
	for _, tc := range []struct {
		name   string
		holder SharedAcquire
		waiter SharedAcquire
	}{
		{"read", SharedAcquire{Key: "k", Owner: "writer", Mode: fsm.ModeWrite, TTL: 10 * time.Second},
			SharedAcquire{Key: "k", Owner: "quitter", Mode: fsm.ModeRead, TTL: 10 * time.Second, Wait: 8 * time.Second}},
		{"permit", SharedAcquire{Key: "k", Owner: "writer", Mode: fsm.ModePermit, Permits: 1, TTL: 10 * time.Second},
			SharedAcquire{Key: "k", Owner: "quitter", Mode: fsm.ModePermit, Permits: 1, TTL: 10 * time.Second, Wait: 8 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := openNode(t, t.TempDir())
			ctx := ctxT(t)
			_, ok, err := n.AcquireShared(ctx, tc.holder)
			require.NoError(t, err)
			require.True(t, ok)
			ch := make(chan acquired, 1)
			go func() {
				g, ok, err := n.AcquireShared(ctx, tc.waiter)
				ch <- acquired{g, ok, err}
			}()
			waitingFor(t, n, 1)
			released, err := n.Release(ctx, "k", "quitter")
			require.NoError(t, err)
			assert.False(t, released)
			a := answeredWithin(t, ch, 2*time.Second, "the quitter's wait after its release")
			require.NoError(t, a.err)
			assert.False(t, a.ok, "the quitter's wait was granted")

			released, err = n.Release(ctx, "k", "writer")
			require.NoError(t, err)
			require.True(t, released)
			hs, err := n.Holders(ctx, "k")
			require.NoError(t, err)
			for _, h := range hs {
				assert.NotEqual(t, "quitter", h.Owner, "granted to the owner after its release")
			}
		})
	}
}

// (c) A release by an owner that never held the key is remembered: the
// owner's delayed acquire after it is refused, on a free key and on a key
// another held across the release, until someone else takes the key after
// it. A repeat of that release still answers 0 (nothing was released).
func TestReleaseByNonHolderRefusesItsLateAcquire(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := ctxT(t)

	released, err := n.Release(ctx, "free", "late")
	require.NoError(t, err)
	assert.False(t, released)
	_, ok, err := n.Acquire(ctx, "free", "late", time.Second, 0)
	require.NoError(t, err)
	assert.False(t, ok, "the late acquire after the owner's release was granted")
	released, err = n.Release(ctx, "free", "late")
	require.NoError(t, err)
	assert.False(t, released, "a repeated release of nothing answers 0")
	// Another owner takes and releases it after: the late owner's next
	// attempt is no delayed duplicate any more.
	mustAcquire(t, n, "free", "other", time.Second)
	released, err = n.Release(ctx, "free", "other")
	require.NoError(t, err)
	require.True(t, released)
	mustAcquire(t, n, "free", "late", time.Second)

	// Held by another across the release: that holder's release (granted
	// before it) does not undo the refusal.
	mustAcquire(t, n, "held", "holder", 10*time.Second)
	released, err = n.Release(ctx, "held", "late")
	require.NoError(t, err)
	assert.False(t, released)
	released, err = n.Release(ctx, "held", "holder")
	require.NoError(t, err)
	require.True(t, released)
	_, ok, err = n.Acquire(ctx, "held", "late", time.Second, 0)
	require.NoError(t, err)
	assert.False(t, ok, "the late acquire after the owner's release was granted")
	// The holder's own release is remembered as before.
	_, ok, err = n.Acquire(ctx, "held", "holder", time.Second, 0)
	require.NoError(t, err)
	assert.False(t, ok)
	mustAcquire(t, n, "held", "third", time.Second)

	// A holder's repeated release still answers 1.
	released, err = n.Release(ctx, "held", "holder")
	require.NoError(t, err)
	assert.True(t, released)
}

// The remembered release is in the log: a new leader refuses the owner's
// late acquire and its hand-off.
func TestReleaseByNonHolderSurvivesLeaderChange(t *testing.T) {
	c := newCluster(t, 3)
	old := c.leader()
	mustAcquire(t, old, "k", "holder", time.Hour)
	released, err := old.Release(ctxT(t), "k", "late")
	require.NoError(t, err)
	require.False(t, released)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	require.NoError(t, old.TransferLeadership(ctx, ""))
	var leader *Node
	require.Eventually(t, func() bool {
		leader = c.leader()
		return leader != old
	}, 15*time.Second, 50*time.Millisecond)
	ch := make(chan acquired, 1)
	go func() {
		g, ok, err := leader.Acquire(ctx, "k", "late", 10*time.Second, 8*time.Second)
		ch <- acquired{g, ok, err}
	}()
	waitingFor(t, leader, 1)
	released, err = leader.Release(ctxT(t), "k", "holder")
	require.NoError(t, err)
	require.True(t, released)
	a := answeredWithin(t, ch, 2*time.Second, "the late wait on the new leader")
	require.NoError(t, a.err)
	assert.False(t, a.ok, "the new leader handed the lock to the owner after its release")
}

// The same for several keys: a multi-key wait ends with its owner's release
// of one of its keys, and FENCE.MRELEASE ends the owner's waits and refuses
// its later acquire of each key as FENCE.RELEASE does.
func TestReleaseEndsMultiKeyWaitsAndMReleaseGivesUp(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := ctxT(t)
	mustAcquire(t, n, "a", "holder", 10*time.Second)
	ch := make(chan acquired, 1)
	go func() {
		g, ok, err := n.AcquireMany(ctx, MultiAcquire{Keys: []string{"a", "b"}, Owner: "quitter", TTL: 10 * time.Second, Wait: 8 * time.Second})
		ch <- acquired{g, ok, err}
	}()
	require.Eventually(t, func() bool { return n.grants.waiting() == 2 }, 5*time.Second, 5*time.Millisecond,
		"the multi-key wait stands in both queues")
	released, err := n.Release(ctx, "b", "quitter")
	require.NoError(t, err)
	assert.False(t, released)
	a := answeredWithin(t, ch, 2*time.Second, "the multi-key wait after its owner's release")
	require.NoError(t, a.err)
	assert.False(t, a.ok)
	assert.Zero(t, n.grants.waiting())

	go func() {
		g, ok, err := n.Acquire(ctx, "a", "quitter2", 10*time.Second, 8*time.Second)
		ch <- acquired{g, ok, err}
	}()
	waitingFor(t, n, 1)
	count, err := n.ReleaseMany(ctx, []string{"a", "c"}, "quitter2", 0)
	require.NoError(t, err)
	assert.Zero(t, count)
	a = answeredWithin(t, ch, 2*time.Second, "the wait after its owner's MRELEASE")
	require.NoError(t, a.err)
	assert.False(t, a.ok)
	released, err = n.Release(ctx, "a", "holder")
	require.NoError(t, err)
	require.True(t, released)
	for _, k := range []string{"a", "c"} {
		_, ok, err := n.Acquire(ctx, k, "quitter2", time.Second, 0)
		require.NoError(t, err)
		assert.False(t, ok, "%s granted to its owner after its MRELEASE", k)
	}
}
