package server

import (
	"testing"
	"time"

	"github.com/fencerlock/fencer/fsm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadWriteLockFIFO(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := ctxT(t)
	rd := func(owner string, wait time.Duration) SharedAcquire {
		return SharedAcquire{Key: "k", Owner: owner, Mode: fsm.ModeRead, TTL: 10 * time.Second, Wait: wait}
	}
	r1, ok, err := n.AcquireShared(ctx, rd("r1", 0))
	require.NoError(t, err)
	require.True(t, ok)
	r2, ok, err := n.AcquireShared(ctx, rd("r2", 0))
	require.NoError(t, err)
	require.True(t, ok)
	assert.Greater(t, r2.Token, r1.Token)

	// A writer waits; a reader arriving after it queues behind it.
	type res struct {
		g   Grant
		ok  bool
		err error
	}
	wch := make(chan res, 1)
	go func() {
		g, ok, err := n.AcquireShared(ctx, SharedAcquire{Key: "k", Owner: "w", Mode: fsm.ModeWrite, TTL: 10 * time.Second, Wait: 10 * time.Second})
		wch <- res{g, ok, err}
	}()
	require.Eventually(t, func() bool { return n.grants.waiting() == 1 }, 5*time.Second, 5*time.Millisecond)
	_, ok, err = n.AcquireShared(ctx, rd("r3", 0))
	require.NoError(t, err)
	assert.False(t, ok, "a reader does not pass a waiting writer")
	rch := make(chan res, 1)
	go func() {
		g, ok, err := n.AcquireShared(ctx, rd("r3", 10*time.Second))
		rch <- res{g, ok, err}
	}()
	require.Eventually(t, func() bool { return n.grants.waiting() == 2 }, 5*time.Second, 5*time.Millisecond)

	_, err = n.Release(ctx, "k", "r1")
	require.NoError(t, err)
	select {
	case <-wch:
		t.Fatal("writer granted while a reader holds")
	case <-time.After(100 * time.Millisecond):
	}
	_, err = n.Release(ctx, "k", "r2")
	require.NoError(t, err)
	w := <-wch
	require.NoError(t, w.err)
	require.True(t, w.ok)
	assert.Greater(t, w.g.Token, r2.Token)
	select {
	case <-rch:
		t.Fatal("reader granted while the writer holds")
	case <-time.After(100 * time.Millisecond):
	}
	// Downgrade keeps the token and lets the waiting reader in.
	d, ok, err := n.AcquireShared(ctx, SharedAcquire{Key: "k", Owner: "w", Mode: fsm.ModeRead, TTL: 10 * time.Second})
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, w.g.Token, d.Token)
	r3 := <-rch
	require.NoError(t, r3.err)
	require.True(t, r3.ok)
	hs, err := n.Holders(ctx, "k")
	require.NoError(t, err)
	require.Len(t, hs, 2)
	assert.Equal(t, fsm.ModeRead, hs[0].Mode)
	// No upgrade.
	_, _, err = n.AcquireShared(ctx, SharedAcquire{Key: "k", Owner: "r3", Mode: fsm.ModeWrite, TTL: 10 * time.Second})
	assert.ErrorIs(t, err, ErrInvalidArgument)
	// Kinds.
	_, _, err = n.Acquire(ctx, "k", "x", time.Second, 0)
	assert.ErrorIs(t, err, ErrWrongType)
	_, _, err = n.AcquireShared(ctx, SharedAcquire{Key: "k", Owner: "x", Mode: fsm.ModePermit, Permits: 2, TTL: time.Second})
	assert.ErrorIs(t, err, ErrWrongType)
}

func TestSemaphoreExpiryHandsSlotOn(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := ctxT(t)
	p := func(owner string, ttl, wait time.Duration) SharedAcquire {
		return SharedAcquire{Key: "s", Owner: owner, Mode: fsm.ModePermit, Permits: 2, TTL: ttl, Wait: wait}
	}
	a, ok, err := n.AcquireShared(ctx, p("a", 10*time.Second, 0))
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, 0, a.Slot)
	b, ok, err := n.AcquireShared(ctx, p("b", 500*time.Millisecond, 0))
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, 1, b.Slot)
	_, _, err = n.AcquireShared(ctx, p("c", time.Second, 0).withPermits(3))
	assert.ErrorIs(t, err, ErrInvalidArgument)
	start := time.Now()
	c, ok, err := n.AcquireShared(ctx, p("c", 10*time.Second, 10*time.Second))
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, 1, c.Slot, "b's slot")
	assert.Greater(t, c.Token, b.Token)
	assert.GreaterOrEqual(t, time.Since(start), 400*time.Millisecond, "not before b's lease ran out")
	ext, err := n.Extend(ctx, "s", "b", time.Second)
	require.NoError(t, err)
	assert.False(t, ext)
	ext, err = n.Extend(ctx, "s", "a", 10*time.Second)
	require.NoError(t, err)
	assert.True(t, ext)
}

func (a SharedAcquire) withPermits(n int) SharedAcquire { a.Permits = n; return a }

// A read waiter is handed the key in a release entry; before that entry
// applies, the same owner's write wait takes the read waiter's place in the
// queue. The entry's read grant is not the write waiter's: it is not
// answered with it, and the grant, which no acquire in progress can return
// (the one queued is answered only by a hand-off), is revoked at once, in an
// entry that hands the key to the write waiter, rather than stalling it
// until its wait ends. (A regression test of the review of issue 20.)
func TestReplacedReadWaitIsNotAnsweredWithItsGrant(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := ctxT(t)
	const ttl, wait = 10 * time.Second, 10 * time.Second
	_, ok, err := n.AcquireShared(ctx, SharedAcquire{Key: "k", Owner: "W", Mode: fsm.ModeWrite, TTL: ttl})
	require.NoError(t, err)
	require.True(t, ok)
	type res struct {
		g   Grant
		ok  bool
		err error
	}
	rch := make(chan res, 1)
	go func() {
		g, ok, err := n.AcquireShared(ctx, SharedAcquire{Key: "k", Owner: "O", Mode: fsm.ModeRead, TTL: ttl, Wait: wait})
		rch <- res{g, ok, err}
	}()
	require.Eventually(t, func() bool { return n.grants.waiting() == 1 }, 5*time.Second, 5*time.Millisecond)
	// Node.release, step 1: the entry names the head waiter (O, read).
	c := fsm.Command{Op: fsm.OpRelease, Key: "k", Owner: "W", Waiter: n.grants.headWaiter("k")}
	require.NotNil(t, c.Waiter)
	require.Equal(t, fsm.ModeRead, c.Waiter.Mode)
	// Meanwhile O asks for the write lock, waiting: it replaces its read wait.
	wch := make(chan res, 1)
	start := time.Now()
	go func() {
		g, ok, err := n.AcquireShared(ctx, SharedAcquire{Key: "k", Owner: "O", Mode: fsm.ModeWrite, TTL: ttl, Wait: wait})
		wch <- res{g, ok, err}
	}()
	r := <-rch
	require.NoError(t, r.err)
	require.False(t, r.ok, "the read wait was replaced")
	require.Eventually(t, func() bool { return n.grants.waiting() == 1 }, 5*time.Second, 5*time.Millisecond)
	// Node.release, step 2: the entry commits, granting O a read hold.
	_, err = n.propose(ctx, c)
	require.NoError(t, err)
	w := <-wch
	require.NoError(t, w.err)
	require.True(t, w.ok, "the write wait is granted once the read grant nobody took is revoked")
	assert.Less(t, time.Since(start), wait/2, "not only when its wait or the read grant's lease ran out")
	hs, err := n.Holders(ctx, "k")
	require.NoError(t, err)
	require.Len(t, hs, 1)
	assert.Equal(t, fsm.ModeWrite, hs[0].Mode, "O holds what it was answered")
	assert.Equal(t, w.g.Token, hs[0].Token)
	_, rok, err := n.AcquireShared(ctx, SharedAcquire{Key: "k", Owner: "R2", Mode: fsm.ModeRead, TTL: ttl})
	require.NoError(t, err)
	assert.False(t, rok, "no reader joins a writer")
}
