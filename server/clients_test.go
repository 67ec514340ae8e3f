package server

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencerlock/fencer/fsm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// clientsOf lists key's holders with their recorded clients.
func clientsOf(t *testing.T, n *Node, key string) map[uint64]*ClientInfo {
	t.Helper()
	p, err := n.Locks(ctxT(t), LockQuery{Prefix: key, Count: 10})
	require.NoError(t, err)
	out := map[uint64]*ClientInfo{}
	for _, l := range p.Locks {
		if l.Name == key {
			for _, h := range l.Holders {
				out[h.Token] = h.Client
			}
		}
	}
	return out
}

func recorded(n *Node) int {
	n.grants.mu.Lock()
	defer n.grants.mu.Unlock()
	return n.grants.clients.n
}

// An acquire made with a client (WithClient) is recorded beside its grant
// on the leader, for plain, shared, waited-for and multi-key grants; the
// record goes when the grant ends (release, revoke, expiry, hand-off) and
// at a restore; one without a client, or for a grant already ended, is not
// kept.
func TestClientRecordedBesideTheGrant(t *testing.T) {
	n := openNode(t, t.TempDir())
	alice := ClientInfo{User: "alice", Addr: "10.0.0.1:4000", Name: "worker-1"}
	bob := ClientInfo{User: "bob", Addr: "10.0.0.2:4000"}
	ctx := ctxT(t)
	as := func(c ClientInfo) context.Context { return WithClient(ctx, c) }

	g, ok, err := n.Acquire(as(alice), "k", "a", time.Minute, 0)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, map[uint64]*ClientInfo{g.Token: &alice}, clientsOf(t, n, "k"))
	// The same owner's acquire again: the same grant, and its first client.
	_, _, err = n.Acquire(as(bob), "k", "a", time.Minute, 0)
	require.NoError(t, err)
	assert.Equal(t, &alice, clientsOf(t, n, "k")[g.Token])

	// bob waits; alice's release hands k to him: his record, not hers.
	type res struct {
		g   Grant
		err error
	}
	waited := make(chan res, 1)
	go func() {
		g, ok, err := n.Acquire(as(bob), "k", "b", time.Minute, 10*time.Second)
		if err == nil && !ok {
			err = errors.New("not granted")
		}
		waited <- res{g, err}
	}()
	require.Eventually(t, func() bool { return n.grants.waiting() == 1 }, 5*time.Second, 5*time.Millisecond)
	_, err = n.Release(ctx, "k", "a")
	require.NoError(t, err)
	w := <-waited
	require.NoError(t, w.err)
	assert.Equal(t, map[uint64]*ClientInfo{w.g.Token: &bob}, clientsOf(t, n, "k"))
	assert.Equal(t, 1, recorded(n), "alice's record went with her grant")

	// Shared holders each have theirs; revoking the key drops them all.
	r1, _, err := n.AcquireShared(as(alice), SharedAcquire{Key: "s", Owner: "r1", TTL: time.Minute, Mode: fsm.ModeRead})
	require.NoError(t, err)
	r2, _, err := n.AcquireShared(as(bob), SharedAcquire{Key: "s", Owner: "r2", TTL: time.Minute, Mode: fsm.ModeRead})
	require.NoError(t, err)
	assert.Equal(t, map[uint64]*ClientInfo{r1.Token: &alice, r2.Token: &bob}, clientsOf(t, n, "s"))
	_, err = n.Release(ctx, "s", "r1")
	require.NoError(t, err)
	assert.Equal(t, map[uint64]*ClientInfo{r2.Token: &bob}, clientsOf(t, n, "s"))
	_, err = n.Revoke(ctx, "s")
	require.NoError(t, err)
	assert.Equal(t, 1, recorded(n))

	// Several keys at once; then an expiry.
	m, ok, err := n.AcquireMany(as(alice), MultiAcquire{Keys: []string{"m1", "m2"}, Owner: "a", TTL: 200 * time.Millisecond})
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, &alice, clientsOf(t, n, "m2")[m.Token])
	assert.Equal(t, 3, recorded(n))
	require.Eventually(t, func() bool { return recorded(n) == 1 }, 5*time.Second, 20*time.Millisecond, "expired: dropped")

	// Without a client: no record, the holder's client unknown.
	g2 := mustAcquire(t, n, "plain", "p", time.Minute)
	assert.Equal(t, map[uint64]*ClientInfo{g2.Token: nil}, clientsOf(t, n, "plain"))
	// A grant that ended before its acquire returned is not recorded.
	_, err = n.Release(ctx, "plain", "p")
	require.NoError(t, err)
	n.grants.recordClient(as(alice), "plain", g2.Token)
	assert.Equal(t, 1, recorded(n))

	// A restore forgets them all.
	n.grants.mu.Lock()
	n.grants.restoredLocked()
	n.grants.mu.Unlock()
	assert.Equal(t, 0, recorded(n))
	assert.Equal(t, map[uint64]*ClientInfo{w.g.Token: nil}, clientsOf(t, n, "k"))
}

// The records are bounded by MaxLocks: past it, those of grants that
// ended unseen go first, and none beyond is kept.
func TestClientRecordsBounded(t *testing.T) {
	n := openNode(t, t.TempDir(), func(c *Config) { c.MaxLocks = 3 })
	ctx := WithClient(ctxT(t), ClientInfo{User: "u"})
	acq := func(k string) Grant {
		g, ok, err := n.Acquire(ctx, k, "o", time.Minute, 0)
		require.NoError(t, err)
		require.True(t, ok)
		return g
	}
	for _, k := range []string{"a", "b", "c"} {
		acq(k)
	}
	assert.Equal(t, 3, recorded(n))
	_, err := n.Release(ctxT(t), "a", "o")
	require.NoError(t, err)
	assert.Equal(t, 2, recorded(n))
	// A record of a grant that ended unseen (as if a command on another
	// key had ended it) fills the records; the next grant's sweeps it.
	n.grants.mu.Lock()
	n.grants.clients.byKey["gone"] = []tokenClient{{1, ClientInfo{User: "stale"}}}
	n.grants.clients.n++
	n.grants.mu.Unlock()
	g := acq("d")
	assert.Equal(t, 3, recorded(n))
	assert.Equal(t, &ClientInfo{User: "u"}, clientsOf(t, n, "d")[g.Token])
	n.grants.mu.Lock()
	assert.NotContains(t, n.grants.clients.byKey, "gone")
	n.grants.mu.Unlock()
}
