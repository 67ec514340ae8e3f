package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func watchPrefix(t *testing.T, n *Node, prefix string, from uint64, resume bool) *Watch {
	t.Helper()
	w, err := n.WatchPrefix(prefix, from, resume)
	require.NoError(t, err)
	t.Cleanup(w.Close)
	return w
}

// A prefix watch is given the events of every key under its prefix, and
// only those, in position order, each with its key; "" is every key. Its
// first event without FROM is a reset that names no key.
func TestWatchPrefixEventsOfEveryKeyUnderIt(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := ctxT(t)
	w := watchPrefix(t, n, "app:", 0, false)
	all := watchPrefix(t, n, "", 0, false)
	assert.Equal(t, n.table.Position(), func() uint64 {
		r := next(t, w)
		assert.Equal(t, WatchEvent{Kind: EventReset, Position: r.Position}, r, "a prefix reset names no key or holder")
		return r.Position
	}())
	next(t, all)
	assert.Equal(t, "app:", w.Key())
	assert.True(t, w.Prefix())

	ga := mustAcquire(t, n, "app:a", "o1", time.Minute)
	mustAcquire(t, n, "other", "o2", time.Minute)
	gb := mustAcquire(t, n, "app:b", "o3", time.Minute)
	_, err := n.Release(ctx, "app:a", "o1")
	require.NoError(t, err)
	rel := n.table.Position()

	want := []WatchEvent{
		{Kind: EventGranted, Key: "app:a", Position: ga.Token, Owner: "o1", Token: ga.Token},
		{Kind: EventGranted, Key: "app:b", Position: gb.Token, Owner: "o3", Token: gb.Token},
		{Kind: EventReleased, Key: "app:a", Position: rel, Owner: "o1", Token: ga.Token},
	}
	for _, e := range want {
		assert.Equal(t, e, next(t, w))
	}
	noEvent(t, w)
	assert.Equal(t, want[0], next(t, all))
	assert.Equal(t, "other", next(t, all).Key)
	assert.Equal(t, want[1], next(t, all))
	assert.Equal(t, want[2], next(t, all))
}

// Resumed from a position, a prefix watch is given the retained events of
// its keys after it; past the window, a reset dated at or after the newest
// position, then what follows. A watch from a position the node has not
// reached gets nothing at or below it.
func TestWatchPrefixResume(t *testing.T) {
	n := openNode(t, t.TempDir(), func(c *Config) { c.WatchWindow = 6 })
	ctx := ctxT(t)
	var seen []WatchEvent
	live := watchPrefix(t, n, "p:", 0, false)
	next(t, live)
	for i := 0; i < 4; i++ {
		key, owner := fmt.Sprint("p:", i), fmt.Sprint("o", i)
		mustAcquire(t, n, key, owner, time.Minute)
		_, err := n.Release(ctx, key, owner)
		require.NoError(t, err)
		seen = append(seen, next(t, live), next(t, live))
	}
	w := watchPrefix(t, n, "p:", seen[2].Position, true)
	for _, e := range seen[3:] {
		assert.Equal(t, e, next(t, w))
	}
	noEvent(t, w)

	old := watchPrefix(t, n, "p:", seen[0].Position, true)
	reset := next(t, old)
	assert.Equal(t, EventReset, reset.Kind)
	assert.GreaterOrEqual(t, reset.Position, seen[7].Position)
	noEvent(t, old)

	pos := n.table.Position()
	ahead := watchPrefix(t, n, "p:", pos+2, true)
	mustAcquire(t, n, "p:x", "a", time.Minute) // pos+1
	mustAcquire(t, n, "p:y", "b", time.Minute) // pos+2
	g := mustAcquire(t, n, "p:z", "c", time.Minute)
	assert.Equal(t, WatchEvent{Kind: EventGranted, Key: "p:z", Position: pos + 3, Owner: "c", Token: g.Token}, next(t, ahead))
}

// A prefix watch that does not read while its queue fills is sent a reset
// dated at or after the last event it was given, never a gap; after a
// restore, it goes on as a per-key watch does.
func TestWatchPrefixOverflowAndRestore(t *testing.T) {
	n := openNode(t, t.TempDir())
	n.watches.mu.Lock()
	n.watches.queue = 4
	n.watches.mu.Unlock()
	w := watchPrefix(t, n, "", 0, false)
	start := next(t, w)
	for i := 0; i < 6; i++ {
		mustAcquire(t, n, fmt.Sprint("k", i), "a", time.Minute)
	}
	reset := next(t, w)
	assert.Equal(t, WatchEvent{Kind: EventReset, Position: n.table.Position()}, reset)
	assert.Greater(t, reset.Position, start.Position)
	noEvent(t, w)
	g := mustAcquire(t, n, "k9", "a", time.Minute)
	assert.Equal(t, WatchEvent{Kind: EventGranted, Key: "k9", Position: g.Token, Owner: "a", Token: g.Token}, next(t, w))

	stale := watchPrefix(t, n, "", g.Token-1, true)
	n.grants.mu.Lock()
	n.watches.restoredLocked()
	n.grants.mu.Unlock()
	// stale had been given k9's grant (replayed) before the restore: it
	// misses nothing and gets no reset; w likewise.
	assert.Equal(t, g.Token, next(t, stale).Position)
	noEvent(t, stale)
	noEvent(t, w)
	resumed := watchPrefix(t, n, "", g.Token-1, true)
	r := next(t, resumed)
	assert.Equal(t, WatchEvent{Kind: EventReset, Position: g.Token}, r, "history before the restore is gone")
}

// Prefix watches count among the node's watches and have a bound of their
// own; a prefix longer than a key may be is refused; closing frees one.
func TestWatchPrefixLimits(t *testing.T) {
	n := openNode(t, t.TempDir(), func(c *Config) { c.MaxWatches = 3; c.MaxPrefixWatches = 2; c.MaxKeyLen = 8 })
	a := watchPrefix(t, n, "a", 0, false)
	watchPrefix(t, n, "", 0, false)
	_, err := n.WatchPrefix("c", 0, false)
	require.ErrorIs(t, err, ErrLimit)
	assert.ErrorContains(t, err, "maximum of 2 prefix watches")
	watch(t, n, "k", 0, false)
	a.Close()
	a.Close()
	_, err = n.Watch("k2", 0, false)
	require.NoError(t, err, "closing a prefix watch frees its place")
	_, err = n.WatchPrefix("d", 0, false)
	require.ErrorIs(t, err, ErrLimit)
	assert.ErrorContains(t, err, "maximum of 3 watches")

	_, err = n.WatchPrefix("123456789", 0, false)
	var arg *ArgumentError
	require.ErrorAs(t, err, &arg)
	assert.Equal(t, "prefix", arg.Arg)

	c := n.watches
	c.mu.Lock()
	assert.Len(t, c.prefixes, 1)
	c.mu.Unlock()
	require.NoError(t, n.Close())
	_, err = n.WatchPrefix("", 0, false)
	assert.ErrorIs(t, err, ErrShutdown)
}

// A follower serves a prefix watch resumed from a position it saw on the
// leader: the same events at the same positions, nothing at or below it.
func TestWatchPrefixOnFollowerMatchesLeader(t *testing.T) {
	c := newCluster(t, 3)
	leader := c.leader()
	var follower *Node
	for _, n := range c.nodes {
		if n != leader {
			follower = n
			break
		}
	}
	ctx := ctxT(t)
	lw := watchPrefix(t, leader, "q:", 0, false)
	from := next(t, lw).Position
	mustAcquire(t, leader, "q:1", "a", time.Minute)
	first := next(t, lw)
	fw := watchPrefix(t, follower, "q:", first.Position, true)
	for i := 2; i < 5; i++ {
		key := fmt.Sprint("q:", i)
		mustAcquire(t, leader, key, "a", time.Minute)
		_, err := leader.Release(ctx, key, "a")
		require.NoError(t, err)
	}
	for i := 0; i < 6; i++ {
		le := next(t, lw)
		fe := next(t, fw)
		assert.Equal(t, le, fe)
		assert.Greater(t, fe.Position, first.Position)
	}
	assert.Greater(t, first.Position, from)
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err := fw.Next(cctx)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}
