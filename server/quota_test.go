package server

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Quotas count the held locks under each pattern through grants, releases,
// expiries, hand-offs to waiters and restarts (log replay and snapshot).
func TestQuotasBoundLocksPerPattern(t *testing.T) {
	dir := t.TempDir()
	withQuotas := func(c *Config) {
		c.Quotas = []Quota{{Name: "user alice", Pattern: "a:*", Max: 2}, {Name: "user bob", Pattern: "b:*", Max: 1}}
		c.SnapshotThreshold = 1 << 20
	}
	n := openNode(t, dir, withQuotas)
	ctx := ctxT(t)

	mustAcquire(t, n, "a:1", "x", time.Minute)
	mustAcquire(t, n, "a:2", "x", time.Minute)
	_, ok, err := n.Acquire(ctx, "a:3", "x", time.Minute, 0)
	require.ErrorIs(t, err, ErrLimit)
	assert.ErrorContains(t, err, `user alice may hold at most 2 locks (names matching "a:*")`)
	assert.False(t, ok)
	// The holder's renewal of a lock it holds is not a new lock.
	mustAcquire(t, n, "a:1", "x", time.Minute)
	// Other patterns and names outside every pattern are not affected.
	mustAcquire(t, n, "b:1", "x", 300*time.Millisecond)
	mustAcquire(t, n, "c:1", "x", time.Minute)
	mustAcquire(t, n, "c:2", "x", time.Minute)

	// A release gives the place back.
	_, err = n.Release(ctx, "a:2", "x")
	require.NoError(t, err)
	mustAcquire(t, n, "a:3", "x", time.Minute)

	// An expiry too.
	_, _, err = n.Acquire(ctx, "b:2", "x", time.Minute, 0)
	require.ErrorIs(t, err, ErrLimit)
	require.Eventually(t, func() bool {
		_, ok, err := n.Acquire(ctx, "b:2", "x", time.Minute, 0)
		return err == nil && ok
	}, 5*time.Second, 50*time.Millisecond, "b:1's expiry did not free bob's place")

	// A hand-off to a waiter keeps the count: the lock stays held.
	got := make(chan error, 1)
	go func() {
		_, ok, err := n.Acquire(ctx, "a:1", "y", time.Minute, 5*time.Second)
		if err == nil && !ok {
			err = assert.AnError
		}
		got <- err
	}()
	require.Eventually(t, func() bool { n.grants.mu.Lock(); defer n.grants.mu.Unlock(); return n.grants.waits.head("a:1") != nil },
		5*time.Second, 5*time.Millisecond)
	_, err = n.Release(ctx, "a:1", "x")
	require.NoError(t, err)
	require.NoError(t, <-got)
	_, _, err = n.Acquire(ctx, "a:4", "x", time.Minute, 0)
	require.ErrorIs(t, err, ErrLimit, "a:1 (y) and a:3 are held")

	// After a restart (log replay), the counts are the same.
	require.NoError(t, n.Close())
	n = openNode(t, dir, withQuotas)
	_, _, err = n.Acquire(ctxT(t), "a:4", "x", time.Minute, 0)
	require.ErrorIs(t, err, ErrLimit, "after replay")

	// And after a restore from a snapshot.
	require.NoError(t, n.raft.Snapshot().Error())
	require.NoError(t, n.Close())
	n = openNode(t, dir, withQuotas)
	_, _, err = n.Acquire(ctxT(t), "a:4", "x", time.Minute, 0)
	require.ErrorIs(t, err, ErrLimit, "after snapshot restore")
	_, err = n.Release(ctxT(t), "a:3", "x")
	require.NoError(t, err)
	mustAcquire(t, n, "a:4", "x", time.Minute)
}

func TestQuotaConfigValidated(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Quotas = []Quota{{Name: "user z", Pattern: "z:*", Max: 0}}
	assert.ErrorContains(t, cfg.Validate(), "config Quotas")
}
