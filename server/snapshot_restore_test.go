package server

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSnapshotRestoreIntoNewCluster(t *testing.T) {
	const ttl = 3 * time.Second
	oldDir := t.TempDir()
	old := openNode(t, oldDir)
	ctx := ctxT(t)
	short := mustAcquire(t, old, "short", "x", ttl)
	long := mustAcquire(t, old, "long", "y", time.Hour)
	gone := mustAcquire(t, old, "gone", "z", time.Hour)
	ok, err := old.Release(ctx, "gone", "z")
	require.NoError(t, err)
	require.True(t, ok)
	for range 5 { // push the old cluster's positions well past the tokens
		mustAcquire(t, old, "long", "y", time.Hour)
	}
	snap, err := old.SnapshotTable(ctx)
	require.NoError(t, err)
	require.NoError(t, old.Close())

	// A node with state refuses to restore.
	again := openNode(t, oldDir)
	_, err = again.RestoreSnapshot(ctx, snap)
	assert.ErrorIs(t, err, ErrRestoreNotNew)
	require.NoError(t, again.Close())

	dir := t.TempDir()
	n := openNode(t, dir)
	_, err = n.RestoreSnapshot(ctx, []byte("junk"))
	assert.ErrorIs(t, err, ErrInvalidArgument)
	restoreStart := time.Now()
	info, err := n.RestoreSnapshot(ctx, snap)
	require.NoError(t, err)
	assert.Equal(t, 2, info.Locks)
	assert.GreaterOrEqual(t, info.MaxToken, gone.Token)

	// Same locks, same tokens.
	for _, c := range []struct {
		key, owner string
		g          Grant
	}{{"short", "x", short}, {"long", "y", long}} {
		s := mustStatus(t, n, c.key)
		assert.Equal(t, c.owner, s.Owner, c.key)
		assert.Equal(t, c.g.Token, s.Token, c.key)
	}
	// The remembered release came along: z cannot take "gone" back.
	_, ok, err = n.Acquire(ctx, "gone", "z", time.Second, 0)
	require.NoError(t, err)
	assert.False(t, ok)
	// New grants' tokens exceed every token the old cluster issued.
	fresh := mustAcquire(t, n, "fresh", "w", time.Hour)
	assert.Greater(t, fresh.Token, info.MaxToken)
	assert.Greater(t, fresh.Token, gone.Token)
	// The node records its own client address (the old members are gone).
	id, addr := n.Leader()
	assert.Equal(t, n.ID(), id)
	assert.Equal(t, n.cfg.ClientAddr, addr)
	assert.Equal(t, map[string]string{n.ID(): n.cfg.ClientAddr}, n.table.Members())

	// The restored short lease runs its full TTL from the restore, not from
	// its grant on the old cluster: held until then, freed after.
	for {
		_, held, err := n.Status(ctx, "short")
		require.NoError(t, err)
		if !held {
			assert.GreaterOrEqual(t, time.Since(restoreStart), ttl, "restored lease freed before its full TTL")
			break
		}
		require.Less(t, time.Since(restoreStart), ttl+10*time.Second, "restored lease never expired")
		time.Sleep(20 * time.Millisecond)
	}

	// A restart of the restored cluster keeps its locks, and tokens go on
	// growing.
	require.NoError(t, n.Close())
	n = openNode(t, dir)
	assert.Equal(t, long.Token, mustStatus(t, n, "long").Token)
	assert.Equal(t, fresh.Token, mustStatus(t, n, "fresh").Token)
	later := mustAcquire(t, n, "later", "w", time.Hour)
	assert.Greater(t, later.Token, fresh.Token)
	_, err = n.RestoreSnapshot(ctx, snap)
	assert.True(t, errors.Is(err, ErrRestoreNotNew), "%v", err)
}

func TestRestoredTableReachesJoinersAndSurvivesHandoff(t *testing.T) {
	old := openNode(t, t.TempDir())
	held := mustAcquire(t, old, "held", "y", time.Hour)
	for range 20 {
		mustAcquire(t, old, "held", "y", time.Hour)
	}
	snap, err := old.SnapshotTable(ctxT(t))
	require.NoError(t, err)
	require.NoError(t, old.Close())

	// n0 of the in-memory cluster bootstrapped a new cluster; restore into it
	// while it is alone, then let the others join: they get the table as a
	// Raft snapshot.
	c := unjoinedCluster(t, 3)
	c.nodes = append(c.nodes, c.open(0))
	n0 := c.leader()
	info, err := n0.RestoreSnapshot(ctxT(t), snap)
	require.NoError(t, err)
	for i := 1; i < 3; i++ {
		n := c.open(i)
		c.nodes = append(c.nodes, n)
		require.NoError(t, n0.Join(ctxT(t), n.ID(), string(c.trans[i].LocalAddr()), n.cfg.ClientAddr))
	}
	for _, n := range c.nodes[1:] {
		require.Eventually(t, func() bool {
			l, ok := n.table.Get("held")
			return ok && l.Token == held.Token
		}, 10*time.Second, 20*time.Millisecond, "node %s has the restored lock", n.ID())
	}
	// Hand leadership over: the new leader, which got the table by snapshot
	// install, issues tokens above the snapshot's too.
	require.NoError(t, n0.Close())
	c.nodes[0] = nil
	next := c.leader()
	assert.Equal(t, held.Token, mustStatus(t, next, "held").Token)
	g := mustAcquire(t, next, "fresh", "w", time.Minute)
	assert.Greater(t, g.Token, info.MaxToken)
}
