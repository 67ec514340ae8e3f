//go:build fencer_faults

package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencerlock/fencer/fsm"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests step into the node at named fault points (faults_enabled.go),
// so they run only in a build with -tags fencer_faults (make test runs them).

// readyFlag reads n's ready flag as the watcher left it.
func readyFlag(n *Node) bool {
	n.grants.mu.Lock()
	defer n.grants.mu.Unlock()
	return n.grants.readiness.ready
}

// otherReady waits for a node other than old whose ready flag is set.
func (c *cluster) otherReady(old *Node) *Node {
	c.t.Helper()
	var found *Node
	require.Eventually(c.t, func() bool {
		for _, n := range c.nodes {
			if n != old && readyFlag(n) {
				found = n
				return true
			}
		}
		return false
	}, 15*time.Second, 10*time.Millisecond, "no other ready leader")
	return found
}

// TestFaultMissedStepDownPair: raft's leader channel keeps only its latest
// value, so a watcher that is slow to read it can miss a step-down and the
// re-election that follows (false, then true, seen as one true). The fault
// point drops the false, as that overwrite would, and holds the true, so the
// re-elected node is leader of a new term while its watcher has done nothing
// yet: reads must wait for the new term's Barrier, the old term's waiters
// must be answered UNCERTAIN, and leases restart at their full TTL.
func TestFaultMissedStepDownPair(t *testing.T) {
	c := newCluster(t, 3)
	a := c.leader()
	ctx := ctxT(t)
	const ttl = 6 * time.Second
	mustAcquire(t, a, "held", "h", time.Hour)
	mustAcquire(t, a, "lease", "l", ttl)

	waited := make(chan error, 1)
	go func() {
		_, granted, err := a.Acquire(ctx, "held", "w", time.Minute, time.Minute)
		if err == nil && granted {
			err = errors.New("granted a held lock")
		}
		waited <- err
	}()
	require.Eventually(t, func() bool {
		a.grants.mu.Lock()
		defer a.grants.mu.Unlock()
		return a.grants.waits.count() == 1
	}, 5*time.Second, 10*time.Millisecond, "the waiter queues on the leader")

	var once sync.Once
	dropped, holding, release := false, make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	unset := setFaultPoint(pointLeaderCh, func(arg any) bool {
		ln := arg.(leaderNotice)
		if ln.id != a.ID() {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		if !ln.leader && !dropped {
			dropped = true
			return true
		}
		if ln.leader && dropped {
			once.Do(func() { close(holding) })
			mu.Unlock()
			<-release
			mu.Lock()
		}
		return false
	})
	defer unset()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()

	require.NoError(t, a.TransferLeadership(ctx, ""))
	b := c.otherReady(a)
	require.NoError(t, b.TransferLeadership(ctx, a.ID()))
	select {
	case <-holding:
	case <-time.After(15 * time.Second):
		t.Fatal("the old leader was not elected again")
	}
	assert.True(t, readyFlag(a), "the dropped step-down left the ready flag set (the case under test)")

	// Leader of the new term, Barrier not run: no read is served.
	rctx, cancel := context.WithTimeout(ctx, 700*time.Millisecond)
	_, _, err := a.Status(rctx, "held")
	cancel()
	require.Error(t, err, "a read was served before the new term's Barrier")

	select {
	case err := <-waited:
		t.Fatalf("the waiter was answered before the watcher ran: %v", err)
	default:
	}
	close(release)
	select {
	case err := <-waited:
		require.ErrorIs(t, err, ErrUnknownOutcome, "a waiter of the old term")
	case <-time.After(10 * time.Second):
		t.Fatal("the old term's waiter is still queued after the new term began")
	}

	require.Eventually(t, func() bool {
		_, _, err := a.Status(ctx, "held")
		return err == nil
	}, 10*time.Second, 20*time.Millisecond, "reads are served once the new term's Barrier ran")
	s := mustStatus(t, a, "lease")
	assert.Greater(t, s.Remaining, ttl-time.Second, "the lease restarted at its full TTL in the new term")
}

// TestFaultStepDownBetweenReadyCheckAndQueueing: an acquire passes the
// readiness check; the node steps down; the acquire, finding others queued,
// would join the queue. If the watcher has not yet emptied it (it is slow, or
// raft's channel lost the notice), the acquire waits on a node that is no
// longer leader. It must instead be told who leads, at once.
func TestFaultStepDownBetweenReadyCheckAndQueueing(t *testing.T) {
	c := newCluster(t, 3)
	a := c.leader()
	ctx := ctxT(t)
	mustAcquire(t, a, "held", "h", time.Hour)
	first := make(chan error, 1)
	go func() {
		_, _, err := a.Acquire(ctx, "held", "w1", time.Minute, time.Minute)
		first <- err
	}()
	require.Eventually(t, func() bool {
		a.grants.mu.Lock()
		defer a.grants.mu.Unlock()
		return a.grants.waits.count() == 1
	}, 5*time.Second, 10*time.Millisecond, "the first waiter queues on the leader")

	// The second acquire stops after its readiness check; the watcher
	// stops on the step-down notice.
	reached, go2 := make(chan struct{}), make(chan struct{})
	var once sync.Once
	defer setFaultPoint(pointAcquireReady, func(arg any) bool {
		if arg.(string) == "held" {
			once.Do(func() { close(reached) })
			<-go2
		}
		return false
	})()
	noticed, goWatch := make(chan struct{}), make(chan struct{})
	var once2 sync.Once
	defer setFaultPoint(pointLeaderCh, func(arg any) bool {
		if ln := arg.(leaderNotice); ln.id == a.ID() && !ln.leader {
			once2.Do(func() { close(noticed) })
			<-goWatch
		}
		return false
	})()
	var released sync.Once
	defer released.Do(func() { close(goWatch) })

	const wait = 20 * time.Second
	type answer struct {
		granted bool
		err     error
		took    time.Duration
	}
	second := make(chan answer, 1)
	go func() {
		start := time.Now()
		_, granted, err := a.Acquire(ctx, "held", "w2", time.Minute, wait)
		second <- answer{granted, err, time.Since(start)}
	}()
	<-reached
	require.NoError(t, a.TransferLeadership(ctx, ""))
	select {
	case <-noticed:
	case <-time.After(10 * time.Second):
		t.Fatal("the old leader's watcher was not told it stepped down")
	}
	close(go2)

	select {
	case ans := <-second:
		require.False(t, ans.granted)
		var nl *NotLeaderError
		require.ErrorAs(t, ans.err, &nl, "the acquire is told who leads (the bridge forwards it there)")
	case <-time.After(2 * time.Second):
		t.Fatal("the acquire queued on a node that is no longer leader")
	}
	released.Do(func() { close(goWatch) })
	select {
	case err := <-first:
		require.ErrorIs(t, err, ErrUnknownOutcome, "the waiter queued while the node led")
	case <-time.After(10 * time.Second):
		t.Fatal("the first waiter was not answered after the step-down")
	}
}

// TestFaultWatchResumedOnLaggingFollower: a watcher that saw the events up
// to p on the leader resumes FROM p-1 (as the Go client does) on a follower
// that is behind p; the follower then installs a snapshot taken below p.
// The fault point holds the follower between the restore and the entries
// after it, when the watch's state, read there, would be older than what
// the watcher saw. The watch must deliver exactly the leader's events after
// its FROM: no reset dated below p, nothing twice, nothing missed.
func TestFaultWatchResumedOnLaggingFollower(t *testing.T) {
	c := newClusterWith(t, 3, func(cfg *Config) {
		cfg.TrailingLogs = 2
		cfg.RaftSegmentSize = minRaftSegmentSize // compaction drops whole segments
	})
	leader := c.leader()
	f := c.follower(leader)
	fi := c.index(f)
	ctx := ctxT(t)
	lw := watch(t, leader, "k", leader.table.Position(), true)

	c.isolate(fi)
	mustAcquire(t, leader, "k", "a", time.Hour)
	owner := strings.Repeat("o", 1000)
	for i := 0; i < 150; i++ {
		mustAcquire(t, leader, fmt.Sprint("fill", i), owner, time.Hour)
	}
	require.NoError(t, leader.raft.Snapshot().Error())
	snapAt := leader.table.Position()
	_, err := leader.Release(ctx, "k", "a")
	require.NoError(t, err)
	mustAcquire(t, leader, "k", "b", time.Hour)
	var seen []WatchEvent
	for i := 0; i < 3; i++ {
		seen = append(seen, next(t, lw))
	}
	p := seen[2].Position
	require.Equal(t, ev{EventGranted, "b", p}, strip(seen[2]))
	require.Greater(t, p, snapAt)
	require.Less(t, f.table.Position(), snapAt, "the follower is behind the snapshot")

	restored := make(chan struct{})
	hold := make(chan struct{})
	var once sync.Once
	unset := setFaultPoint(pointRestored, func(arg any) bool {
		if arg == f.table {
			once.Do(func() { close(restored); <-hold })
		}
		return false
	})
	defer unset()
	released := sync.OnceFunc(func() { close(hold) })
	defer released()

	fw := watch(t, f, "k", p-1, true)
	c.heal(fi)
	select {
	case <-restored:
	case <-time.After(10 * time.Second):
		t.Fatal("the follower did not install a snapshot")
	}
	// Held right after the restore, below p: nothing to deliver yet.
	require.Less(t, f.table.Position(), p)
	noEvent(t, fw)
	released()

	_, err = leader.Release(ctx, "k", "b")
	require.NoError(t, err)
	last := next(t, lw)
	assert.Equal(t, seen[2], next(t, fw), "the event at p again, as asked")
	assert.Equal(t, last, next(t, fw))
	noEvent(t, fw)
}

// A listing guards each key it leaves out as run out on the leader: if that
// lease's expiry and the hand-off of the key to its waiter commit in one
// entry, the key's name never leaves the table, but a transaction that
// decided on "no such key" must not commit. The fault point holds that
// entry until the transaction has listed.
func TestFaultKeysGuardsTheKeysItLeavesOut(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := ctxT(t)
	mustAcquire(t, n, "res:1", "old", 300*time.Millisecond)
	granted := make(chan error, 1)
	go func() {
		_, ok, err := n.Acquire(ctx, "res:1", "waiter", time.Minute, 10*time.Second)
		if err == nil && !ok {
			err = fmt.Errorf("not granted")
		}
		granted <- err
	}()
	require.Eventually(t, func() bool {
		var q bool
		n.grants.locked(func() { q = n.grants.waits.head("res:1") != nil })
		return q
	}, 5*time.Second, 5*time.Millisecond)
	expiring := make(chan struct{})
	hold := make(chan struct{})
	var once sync.Once
	defer setFaultPoint(pointProposeExpires, func(arg any) bool {
		for _, c := range arg.([]fsm.Command) {
			if c.Key == "res:1" {
				once.Do(func() { close(expiring); <-hold })
			}
		}
		return false
	})()
	<-expiring // the lease ran out on the leader; its expiry waits
	attempts := 0
	var busy bool
	require.NoError(t, n.Update(ctx, []string{"global"}, func(tx *Tx) error {
		attempts++
		busy = len(tx.Keys("res:*")) > 0
		if attempts == 1 {
			close(hold) // the expiry and the hand-off commit in one entry
			require.NoError(t, <-granted)
		}
		if busy {
			return nil
		}
		return tx.Put("global", fsm.KindString, "me", 0, false)
	}))
	s, held, err := n.Status(ctx, "res:1")
	require.NoError(t, err)
	require.True(t, held)
	assert.Equal(t, "waiter", s.Owner)
	_, globalHeld, err := n.Status(ctx, "global")
	require.NoError(t, err)
	assert.False(t, globalHeld && held, "global taken while res:1 is held (attempts %d)", attempts)
	assert.True(t, busy)
}

// TestFaultClusterIDForAnOlderDataDirectory: a cluster made by a version
// without IDs (the fault point skips the proposal, as that version did) gets
// one when its leader first runs this version, once: a restart keeps it.
// Every member of a three-node cluster has the same ID, in its table and in
// its data directory.
func TestFaultClusterIDForAnOlderDataDirectory(t *testing.T) {
	dir := t.TempDir()
	unset := setFaultPoint(pointProposeClusterID, func(any) bool { return true })
	n := openNode(t, dir)
	mustAcquire(t, n, "k", "o", time.Minute)
	require.Equal(t, "", n.ClusterID())
	require.NoError(t, n.Close())
	unset()

	n = openNode(t, dir)
	require.Eventually(t, func() bool {
		rec, err := readClusterID(dir)
		return err == nil && rec != "" && rec == n.ClusterID()
	}, 10*time.Second, 10*time.Millisecond)
	id := n.ClusterID()
	require.NoError(t, n.Close())
	n = openNode(t, dir)
	c := newCluster(t, 3)
	leader := c.leader()
	require.Eventually(t, func() bool { return n.ClusterID() != "" && leader.ClusterID() != "" }, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, id, n.ClusterID(), "the same ID after a restart")
	for i, m := range c.nodes {
		require.Eventually(t, func() bool {
			rec, err := readClusterID(c.dirs[i])
			return err == nil && rec == leader.ClusterID() && m.ClusterID() == rec
		}, 10*time.Second, 10*time.Millisecond, "node %d's table and data directory", i)
	}
	assert.NotEqual(t, id, leader.ClusterID(), "another cluster, another ID")
}

// isolate cuts node i off from the others, both ways; heal reconnects it.
func (c *cluster) isolate(i int) {
	for j, tr := range c.trans {
		if j != i {
			tr.Disconnect(c.trans[i].LocalAddr())
			c.trans[i].Disconnect(tr.LocalAddr())
		}
	}
}

func (c *cluster) heal(i int) {
	for j, tr := range c.trans {
		if j != i {
			tr.Connect(c.trans[i].LocalAddr(), c.trans[i])
			c.trans[i].Connect(tr.LocalAddr(), tr)
		}
	}
}

// follower returns an open node that is not n.
func (c *cluster) follower(n *Node) *Node {
	for _, m := range c.nodes {
		if m != nil && m != n {
			return m
		}
	}
	c.t.Fatal("no other node")
	return nil
}

// A removal cut short between its tombstone and its configuration change
// leaves the member known to have run: a server that lost its state under
// that ID and asks the leader is refused, not taken for one that never ran
// (as it was when Remove only cleared the address), and the ID records no
// address until the removal is finished; after it, the ID joins afresh.
func TestRemoveCutShortLeavesTombstone(t *testing.T) {
	c := newCluster(t, 3)
	leader := c.leader()
	var victim *Node
	for _, n := range c.nodes {
		if n != leader {
			victim = n
		}
	}
	ctx := ctxT(t)
	unset := setFaultPoint("remove-cut-short", func(any) bool { return true })
	require.ErrorIs(t, leader.Remove(ctx, victim.ID()), ErrUnknownOutcome)
	unset()
	wiped := FormingReport{ID: victim.ID(), RaftAddr: victim.RaftAddr(), Expect: 3}
	d := DecideFormation(wiped, []FormingReport{leader.FormingReport()})
	require.ErrorIs(t, d.Err, ErrLostMember, "a member whose removal was cut short, without its state: %s", d.Why)
	assert.False(t, d.Vote)
	require.ErrorIs(t, leader.Join(ctx, victim.ID(), victim.RaftAddr(), victim.cfg.ClientAddr), ErrLostMember, "no address over a tombstone")
	require.NoError(t, leader.Remove(ctx, victim.ID()))
	require.NoError(t, leader.Join(ctx, victim.ID(), victim.RaftAddr(), victim.cfg.ClientAddr), "a removed ID joins afresh")
	assert.Equal(t, victim.cfg.ClientAddr, leader.table.Members()[victim.ID()])
	assert.False(t, leader.table.Removed(victim.ID()))
}

// A node that restarts with an uncommitted tail in its log (entries its
// old leadership appended while cut off, which the new leader truncates)
// reports itself replayed once it knows a leader and applied what it knows
// committed: its last index at restart is never reached without more
// traffic, and counting on it kept the report false for good.
func TestFormingReportReplayedPastAnUncommittedTail(t *testing.T) {
	c := newCluster(t, 3)
	old := c.leader()
	i := c.index(old)
	c.isolate(i)
	for k := range 3 {
		old.raft.Apply(fsm.Command{Op: fsm.OpMember, Key: fmt.Sprintf("ghost%d", k), Owner: "127.0.0.1:1"}.Encode(nil), 0)
	}
	require.Eventually(t, func() bool { return old.raft.LastIndex() >= old.raft.CommitIndex()+3 }, 5*time.Second, 10*time.Millisecond)
	c.nodes[i] = nil
	_ = old.Close()
	newLeader := c.leader()
	_, tr := raft.NewInmemTransport(c.trans[i].LocalAddr())
	c.trans[i] = tr
	c.heal(i)
	c.nodes[i] = c.open(i)
	back := c.nodes[i]
	require.Eventually(t, func() bool { id, _ := back.Leader(); return id == newLeader.ID() }, 10*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool { return back.FormingReport().Replayed }, 10*time.Second, 50*time.Millisecond,
		"opened at index %d, applied %d", back.openedIndex, back.raft.AppliedIndex())
}

// A join cut short between its two steps leaves no voter without a
// record: the address is committed before the member is added, so a
// leader whose log has the member has its address too. (Before, Join added
// the voter first; a re-join of a removed ID cut short left a live voter
// under its tombstone for good, refused at every retry: the review's R7.)
func TestJoinCutShortLeavesNoUnrecordedVoter(t *testing.T) {
	c := newCluster(t, 3)
	leader := c.leader()
	var victim *Node
	for _, n := range c.nodes {
		if n != leader {
			victim = n
		}
	}
	ctx := ctxT(t)
	require.NoError(t, leader.Remove(ctx, victim.ID()))
	require.True(t, leader.table.Removed(victim.ID()))
	unset := setFaultPoint("join-cut-short", func(any) bool { return true })
	require.ErrorIs(t, leader.Join(ctx, victim.ID(), victim.RaftAddr(), victim.cfg.ClientAddr), ErrUnknownOutcome)
	unset()
	rec, _ := leader.table.Recorded(victim.ID())
	assert.Equal(t, victim.cfg.ClientAddr, rec, "the address is recorded before the member is added")
	members, err := leader.Members(ctx)
	require.NoError(t, err)
	for _, m := range members {
		assert.NotEqual(t, victim.ID(), m.ID, "added before its address was recorded")
	}
	require.NoError(t, leader.Join(ctx, victim.ID(), victim.RaftAddr(), victim.cfg.ClientAddr), "the join, retried, completes")
	assert.False(t, leader.table.Removed(victim.ID()))
	members, err = leader.Members(ctx)
	require.NoError(t, err)
	assert.True(t, slices.ContainsFunc(members, func(m Member) bool { return m.ID == victim.ID() }), "a member again: %v", members)
}
