package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/fencerlock/fencer/fsm"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cluster is an in-process cluster on raft's in-memory transport, with real
// raft-wal stores in temp dirs.
type cluster struct {
	t     *testing.T
	nodes []*Node
	trans []*raft.InmemTransport
	dirs  []string
	// mod, if set, changes each node's configuration before it opens.
	mod func(*Config)
}

// unjoinedCluster connects size in-memory transports and makes their data
// directories, without opening any node: the test opens them (c.open) and
// joins them when it wants.
func unjoinedCluster(t *testing.T, size int) *cluster {
	t.Helper()
	c := &cluster{t: t}
	for i := 0; i < size; i++ {
		_, tr := raft.NewInmemTransport(raft.ServerAddress(fmt.Sprintf("127.0.0.2:%d", 18000+i)))
		c.trans = append(c.trans, tr)
		c.dirs = append(c.dirs, t.TempDir())
	}
	for i, a := range c.trans {
		for j, b := range c.trans {
			if i != j {
				a.Connect(b.LocalAddr(), b)
			}
		}
	}
	return c
}

// newCluster opens size nodes on in-memory transports and joins them into
// one cluster.
func newCluster(t *testing.T, size int) *cluster {
	t.Helper()
	return newClusterWith(t, size, nil)
}

// newClusterWith is newCluster with mod applied to each node's
// configuration.
func newClusterWith(t *testing.T, size int, mod func(*Config)) *cluster {
	t.Helper()
	c := unjoinedCluster(t, size)
	c.mod = mod
	for i := 0; i < size; i++ {
		c.nodes = append(c.nodes, c.open(i))
	}
	leader := c.leader()
	ctx := ctxT(t)
	for i, n := range c.nodes {
		if n != leader {
			require.NoError(t, leader.Join(ctx, n.ID(), string(c.trans[i].LocalAddr()), n.cfg.ClientAddr))
		}
	}
	// Every node, not only the leader, has the whole configuration: a test
	// that then removes a node removes one that has caught up, as an
	// operator would (a node removed before it has the entries up to its
	// removal never learns of it; docs/design.md, Membership).
	require.Eventually(t, func() bool {
		for _, n := range c.nodes {
			ms, err := n.Members(ctx)
			if err != nil || len(ms) != size {
				return false
			}
		}
		return true
	}, 10*time.Second, 20*time.Millisecond)
	return c
}

func (c *cluster) open(i int) *Node {
	c.t.Helper()
	cfg := DefaultConfig()
	cfg.ID = fmt.Sprintf("n%d", i)
	cfg.DataDir = c.dirs[i]
	cfg.ClientAddr = fmt.Sprintf("127.0.0.1:%d", 17000+i)
	cfg.Transport = c.trans[i]
	cfg.Join = i != 0
	cfg.RaftLogLevel = "error"
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if c.mod != nil {
		c.mod(&cfg)
	}
	n, err := Open(cfg)
	require.NoError(c.t, err)
	c.t.Cleanup(func() { _ = n.Close() })
	return n
}

// leader waits for a ready leader among the open nodes.
func (c *cluster) leader() *Node {
	c.t.Helper()
	var found *Node
	require.Eventually(c.t, func() bool {
		for _, n := range c.nodes {
			if n == nil {
				continue
			}
			n.grants.mu.Lock()
			ready := n.grants.readiness.ready
			n.grants.mu.Unlock()
			if ready {
				found = n
				return true
			}
		}
		return false
	}, 15*time.Second, 10*time.Millisecond, "no ready leader")
	return found
}

func (c *cluster) index(n *Node) int {
	for i, m := range c.nodes {
		if m == n {
			return i
		}
	}
	return -1
}

func TestClusterFollowersNameTheLeader(t *testing.T) {
	c := newCluster(t, 3)
	leader := c.leader()
	g := mustAcquire(t, leader, "k", "o", time.Minute)
	for _, n := range c.nodes {
		id, addr := n.Leader()
		assert.Equal(t, leader.ID(), id)
		assert.Equal(t, leader.cfg.ClientAddr, addr, "node %s knows the leader's client address", n.ID())
		if n == leader {
			continue
		}
		_, _, err := n.Acquire(ctxT(t), "k2", "o", time.Minute, 0)
		var nl *NotLeaderError
		require.ErrorAs(t, err, &nl)
		assert.Equal(t, leader.cfg.ClientAddr, nl.LeaderAddr)
		// Followers apply the log too.
		require.Eventually(t, func() bool {
			l, held := n.table.Get("k")
			return held && l.Token == g.Token
		}, 5*time.Second, 10*time.Millisecond)
	}
	ms, err := c.nodes[1].Members(ctxT(t))
	require.NoError(t, err)
	require.Len(t, ms, 3)
	for _, m := range ms {
		assert.NotEmpty(t, m.ClientAddr, "member %s", m.ID)
		assert.Equal(t, m.ID == leader.ID(), m.Role == "leader")
	}
}

func TestClusterFailoverKeepsLocksAndTokensAndRestartsLeases(t *testing.T) {
	c := newCluster(t, 3)
	old := c.leader()
	const ttl = 4 * time.Second
	held := mustAcquire(t, old, "held", "alive", time.Hour)
	dying := mustAcquire(t, old, "dying", "dead-holder", ttl)
	var maxTok uint64
	for i := 0; i < 20; i++ {
		g := mustAcquire(t, old, fmt.Sprintf("x%d", i), "o", time.Hour)
		maxTok = max(maxTok, g.Token)
	}

	// The leader dies.
	i := c.index(old)
	require.NoError(t, old.Close())
	c.nodes[i] = nil
	for j, tr := range c.trans {
		if j != i {
			tr.Disconnect(c.trans[i].LocalAddr())
		}
	}
	lost := time.Now()
	leader := c.leader()
	readyAt := time.Now()
	assert.Less(t, readyAt.Sub(lost), 10*time.Second, "new leader within a few seconds")

	ctx := ctxT(t)
	s, ok, err := leader.Status(ctx, "held")
	require.NoError(t, err)
	require.True(t, ok, "lock held before the failover is still held")
	assert.Equal(t, held.Token, s.Token)

	g := mustAcquire(t, leader, "new", "o", time.Minute)
	assert.Greater(t, g.Token, maxTok, "new tokens exceed every earlier token")

	// The dead holder's lock is free only after a full TTL from the new
	// leader's start, not before.
	for time.Since(readyAt) < ttl-300*time.Millisecond {
		_, granted, err := leader.Acquire(ctx, "dying", "next", time.Minute, 0)
		require.NoError(t, err)
		require.False(t, granted, "freed %v after the new leader was ready, before its TTL %v", time.Since(readyAt), ttl)
		time.Sleep(150 * time.Millisecond)
	}
	ng, granted, err := leader.Acquire(ctx, "dying", "next", time.Minute, 2*ttl)
	require.NoError(t, err)
	require.True(t, granted, "free within 2x TTL of the new leader's start")
	assert.Greater(t, ng.Token, dying.Token)
	assert.GreaterOrEqual(t, time.Since(readyAt), ttl-100*time.Millisecond)
}

func TestClusterRejoinAndFullRestart(t *testing.T) {
	c := newCluster(t, 3)
	leader := c.leader()
	var maxTok uint64
	for i := 0; i < 10; i++ {
		g := mustAcquire(t, leader, fmt.Sprintf("k%d", i), "o", time.Hour)
		maxTok = max(maxTok, g.Token)
	}
	// Every node stops, then all restart at once from their data dirs.
	for i, n := range c.nodes {
		require.NoError(t, n.Close())
		c.nodes[i] = nil
	}
	for i := range c.trans {
		_, tr := raft.NewInmemTransport(c.trans[i].LocalAddr())
		c.trans[i] = tr
	}
	for i, a := range c.trans {
		for j, b := range c.trans {
			if i != j {
				a.Connect(b.LocalAddr(), b)
			}
		}
	}
	for i := range c.nodes {
		c.nodes[i] = c.open(i)
	}
	leader = c.leader()
	ctx := ctxT(t)
	for i := 0; i < 10; i++ {
		_, ok, err := leader.Status(ctx, fmt.Sprintf("k%d", i))
		require.NoError(t, err)
		assert.True(t, ok, "k%d survives a full restart", i)
	}
	g := mustAcquire(t, leader, "after", "o", time.Minute)
	assert.Greater(t, g.Token, maxTok, "the token counter never goes back")
}

func TestClusterRemoveMember(t *testing.T) {
	c := newCluster(t, 3)
	leader := c.leader()
	var victim *Node
	for _, n := range c.nodes {
		if n != leader {
			victim = n
		}
	}
	ctx := ctxT(t)
	// The relay of a publish goes to the other members' client addresses.
	require.ElementsMatch(t, others(c, leader), leader.PeerAddrs())
	require.ErrorIs(t, leader.Remove(ctx, "nobody"), ErrUnknownMember)
	require.NoError(t, leader.Remove(ctx, victim.ID()))
	ms, err := leader.Members(ctx)
	require.NoError(t, err)
	require.Len(t, ms, 2)
	for _, m := range ms {
		assert.NotEqual(t, victim.ID(), m.ID)
	}
	assert.NotContains(t, leader.PeerAddrs(), victim.cfg.ClientAddr, "a removed member gets no relays")
	assert.Len(t, leader.PeerAddrs(), 1)
	mustAcquire(t, leader, "still-works", "o", time.Minute)

	// The removed node says so at once instead of waiting for a leader.
	require.Eventually(t, func() bool {
		start := time.Now()
		_, _, err := victim.Acquire(ctxT(t), "k", "o", time.Minute, 0)
		return errors.Is(err, ErrNotMember) && time.Since(start) < time.Second
	}, 15*time.Second, 100*time.Millisecond)
}

// others returns the client addresses of the cluster's nodes but n.
func others(c *cluster, n *Node) []string {
	var out []string
	for _, m := range c.nodes {
		if m != n {
			out = append(out, m.cfg.ClientAddr)
		}
	}
	return out
}

func TestClusterLeadershipTransfer(t *testing.T) {
	c := newCluster(t, 3)
	old := c.leader()
	g := mustAcquire(t, old, "k", "o", time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	require.NoError(t, old.TransferLeadership(ctx, ""))
	var leader *Node
	require.Eventually(t, func() bool {
		leader = c.leader()
		return leader != old
	}, 15*time.Second, 50*time.Millisecond)
	s, ok, err := leader.Status(ctxT(t), "k")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, g.Token, s.Token)
}

// A leader records every voter of its configuration that has no record
// before it is ready (recordVoters), so a member whose record an earlier
// build cleared (main's FENCE.REMOVE cleared the address first; cut short,
// it left a member that ran with no record) is known to have run again
// once this build leads: without its state it is refused, never vouched
// for. (On deploy 2eb1653 the wiped member got vote true: "named without
// a recorded client address".)
func TestClusterLeaderRecordsEveryVoterBeforeReady(t *testing.T) {
	c := newCluster(t, 3)
	leader := c.leader()
	var victim, next *Node
	for _, n := range c.nodes {
		switch {
		case n == leader:
		case victim == nil:
			victim = n
		default:
			next = n
		}
	}
	ctx := ctxT(t)
	// As main's Remove did before its RemoveServer: the address cleared.
	require.NoError(t, leader.raft.Apply(fsm.Command{Op: fsm.OpMember, Key: victim.ID()}.Encode(nil), 0).Error())
	require.NoError(t, leader.TransferLeadership(ctx, next.ID()))
	require.Eventually(t, func() bool { ready, _, _ := next.grants.state(); return ready }, 10*time.Second, 20*time.Millisecond)
	wiped := FormingReport{ID: victim.ID(), RaftAddr: victim.RaftAddr(), Expect: 3}
	d := DecideFormation(wiped, []FormingReport{next.FormingReport()})
	require.ErrorIs(t, d.Err, ErrLostMember, "a member that ran, its record cleared, without its state: step %d, vote %v (%s)", d.Step, d.Vote, d.Why)
	assert.False(t, d.Vote)
}
