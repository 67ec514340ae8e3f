package server

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fencerlock/fencer/fsm"
	"github.com/fencerlock/fencer/internal/version"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// formedCluster opens the first size nodes of an unjoined cluster of
// total and bootstraps them together, as --bootstrap-expect does: the
// first leader has heard from no member, so the format level stays 0
// until they tell it what they read. In these in-process clusters no
// bridge probes the members: the test records each member's answer
// (RecordProgress), as the bridge records it from FENCE.PROGRESS (a build
// from before levels answers without format_readable: 0).
func formedCluster(t *testing.T, size, total int, mods ...func(*Config)) *cluster {
	t.Helper()
	c := unjoinedCluster(t, total)
	c.mod = func(cfg *Config) {
		cfg.BootstrapExpect, cfg.Join = size, true
		for _, m := range mods {
			m(cfg)
		}
	}
	var reports []FormingReport
	for i := 0; i < size; i++ {
		c.nodes = append(c.nodes, c.open(i))
		reports = append(reports, FormingReport{ID: c.nodes[i].ID(), RaftAddr: string(c.trans[i].LocalAddr())})
	}
	c.mod = nil
	if len(mods) > 0 {
		c.mod = func(cfg *Config) {
			for _, m := range mods {
				m(cfg)
			}
		}
	}
	for _, n := range c.nodes {
		require.NoError(t, n.BootstrapWith(reports))
		n.AllowVotes()
	}
	c.leader()
	return c
}

// answer records, on leader, the probe answer of every other open node,
// reading levels up to readable[id] (this build's level if absent).
func answer(leader *Node, c *cluster, readable map[string]uint64) {
	for _, n := range c.nodes {
		if n == nil || n == leader {
			continue
		}
		p := n.Progress()
		if r, ok := readable[n.ID()]; ok {
			p.FormatReadable = r
		}
		leader.RecordProgress(n.ID(), time.Now(), p, version.Version)
	}
}

// probing answers for every open node, every 100 ms, on the node target
// returns (the leader, as the bridge's probe does once a second) until the
// returned function is called. c.nodes must not change meanwhile.
func probing(c *cluster, target func() *Node, readable map[string]uint64) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			if n := target(); n != nil {
				answer(n, c, readable)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(done); <-finished }
}

// leading returns the open node that is Raft's leader, or nil.
func leading(c *cluster) func() *Node {
	return func() *Node {
		for _, n := range c.nodes {
			if n != nil && n.raft.State() == raft.Leader {
				return n
			}
		}
		return nil
	}
}

// levels returns every open node's applied format level.
func levels(c *cluster) []uint64 {
	var out []uint64
	for _, n := range c.nodes {
		if n != nil {
			out = append(out, n.FormatInUse())
		}
	}
	return out
}

// TestFormatLeaderAloneRaisesBeforeReady: a cluster of one reads what its
// only member reads: it is at level 1 before it serves its first request,
// and a give-up is remembered from the first release.
func TestFormatLeaderAloneRaisesBeforeReady(t *testing.T) {
	n := openNode(t, t.TempDir())
	assert.Equal(t, fsm.FormatReadable, n.FormatInUse())
	_, err := n.Release(ctxT(t), "k", "quitter")
	require.NoError(t, err)
	assert.True(t, n.table.Refuses("k", "quitter"), "the give-up flag is written at level 1")
	assert.Equal(t, byte(8), n.table.MarshalSnapshot()[4], "snapshot version 8 at level 1")
}

// TestFormatRaiseWaitsForEveryMember: a leader raises the level only once
// every member of its configuration told it that it reads it; until then
// a release by an owner that holds nothing is not remembered (no give-up
// flag: what a level-0 build reads), and snapshots are version 7.
func TestFormatRaiseWaitsForEveryMember(t *testing.T) {
	c := formedCluster(t, 3, 3)
	leader := c.leader()
	term, ok := leader.grants.readyTerm()
	require.True(t, ok)
	ctx := ctxT(t)

	assert.Equal(t, uint64(0), leader.raiseFormat(term), "nobody answered yet")
	answer(leader, c, map[string]uint64{c.nodes[(c.index(leader)+1)%3].ID(): 0})
	assert.Equal(t, uint64(0), leader.raiseFormat(term), "one member reads level 0 only")
	time.Sleep(2 * formatCheckInterval) // the loop too
	assert.Equal(t, []uint64{0, 0, 0}, levels(c))

	_, err := leader.Release(ctx, "k", "quitter")
	require.NoError(t, err)
	assert.False(t, leader.table.Refuses("k", "quitter"), "no give-up flag at level 0")
	assert.Equal(t, byte(7), leader.table.MarshalSnapshot()[4], "snapshot version 7 at level 0")

	defer probing(c, leading(c), nil)() // every member reads level 1 now (the last one upgraded)
	require.Eventually(t, func() bool {
		for _, l := range levels(c) {
			if l != 1 {
				return false
			}
		}
		return true
	}, 10*time.Second, 20*time.Millisecond, "the loop raises the level once every member reads it: %v", levels(c))
	_, err = leader.Release(ctx, "k", "quitter")
	require.NoError(t, err)
	assert.True(t, leader.table.Refuses("k", "quitter"), "the give-up flag is written at level 1")
	assert.Equal(t, byte(8), leader.table.MarshalSnapshot()[4])
}

// TestFormatStaleAnswersDoNotCount: an answer older than the unreachable
// limit, or given to an earlier leadership, does not count: a member may
// have been rolled back since.
func TestFormatStaleAnswersDoNotCount(t *testing.T) {
	c := formedCluster(t, 2, 2)
	leader := c.leader()
	term, _ := leader.grants.readyTerm()
	answer(leader, c, nil)
	leader.health.mu.Lock()
	for id, r := range leader.health.reports {
		r.at, r.asked = r.at.Add(-time.Hour), r.asked.Add(-time.Hour)
		leader.health.reports[id] = r
	}
	leader.health.term-- // given to an earlier leadership
	leader.health.mu.Unlock()
	assert.Equal(t, uint64(0), leader.raiseFormat(term))
	assert.Equal(t, []uint64{0, 0}, levels(c))
}

// TestFormatJoinRefused: a server that reads only a level below the
// cluster's is refused, with both levels named, and the configuration is
// unchanged; one that reads it joins.
func TestFormatJoinRefused(t *testing.T) {
	c := unjoinedCluster(t, 2)
	c.nodes = append(c.nodes, c.open(0))
	leader := c.leader()
	require.Equal(t, uint64(1), leader.FormatInUse())
	joiner := c.open(1)
	c.nodes = append(c.nodes, joiner)
	ctx := ctxT(t)
	err := leader.JoinReading(ctx, joiner.ID(), string(c.trans[1].LocalAddr()), joiner.cfg.ClientAddr, 0)
	require.ErrorIs(t, err, ErrFormatRefused)
	assert.Contains(t, err.Error(), `"n1" reads format levels up to 0, and the cluster is at format level 1`)
	ms, err := leader.Members(ctx)
	require.NoError(t, err)
	assert.Len(t, ms, 1, "the refused server was not added")
	_, recorded := leader.table.Recorded(joiner.ID())
	assert.False(t, recorded, "nor its address recorded")

	require.NoError(t, leader.JoinReading(ctx, joiner.ID(), string(c.trans[1].LocalAddr()), joiner.cfg.ClientAddr, 1))
	ms, err = leader.Members(ctx)
	require.NoError(t, err)
	assert.Len(t, ms, 2)
}

// TestFormatRaiseWaitsForNewMember: a server added since the members
// answered must answer too (a level-1 build here: it joins a level-0
// cluster, which it reads).
func TestFormatRaiseWaitsForNewMember(t *testing.T) {
	c := formedCluster(t, 2, 3)
	leader := c.leader()
	term, _ := leader.grants.readyTerm()
	joiner := c.open(2)
	require.NoError(t, leader.Join(ctxT(t), joiner.ID(), string(c.trans[2].LocalAddr()), joiner.cfg.ClientAddr))
	answer(leader, c, nil) // the first two only
	assert.Equal(t, uint64(0), leader.raiseFormat(term), "the new member has not answered")
	time.Sleep(2 * formatCheckInterval) // the loop neither
	assert.Equal(t, []uint64{0, 0}, levels(c))
	c.nodes = append(c.nodes, joiner)
	defer probing(c, leading(c), nil)()
	require.Eventually(t, func() bool { return joiner.FormatInUse() == 1 && leader.FormatInUse() == 1 }, 10*time.Second, 10*time.Millisecond)
}

// TestFormatUnreadableLevelStops: a node that applies a raise to a level
// its build cannot read stops applying, says why on Stopped (the levels
// and its version), and refuses to start on its data directory again with
// the same message. No build writes level 2 yet: the test commits the
// entry a later build would (the one fake here).
func TestFormatUnreadableLevelStops(t *testing.T) {
	dir := t.TempDir()
	n := openNode(t, dir)
	c := fsm.Command{Op: fsm.OpFormat, Level: uint8(fsm.FormatReadable + 1)}
	f := n.raft.Apply(c.Encode(nil), 5*time.Second)
	_ = f.Error() // the node shuts Raft down as it stops: the future may fail
	var stopped error
	select {
	case stopped = <-n.Stopped():
	case <-time.After(10 * time.Second):
		t.Fatal("the node did not stop")
	}
	require.ErrorIs(t, stopped, ErrUnreadableFormat)
	want := fmt.Sprintf("raises the cluster's format level to 2, and this build reads format levels up to 1 (this is fencer %s)", version.Version)
	assert.Contains(t, stopped.Error(), want)
	assert.Equal(t, uint64(1), n.FormatInUse(), "the level it cannot read is not applied")
	require.NoError(t, n.Close())

	cfg := DefaultConfig()
	cfg.DataDir, cfg.RaftAddr, cfg.RaftLogLevel = dir, "127.0.0.1:0", "error"
	_, err := Open(cfg)
	require.ErrorIs(t, err, ErrUnreadableFormat)
	assert.Equal(t, stopped.Error(), err.Error(), "the same message on every start")

	// A build that reads the level removes the record and starts.
	require.NoError(t, refuseUnreadable(dir, &fsm.FormatError{Level: fsm.FormatReadable}))
	assert.NoError(t, checkRefused(dir))
	assert.NoError(t, checkRefused(dir), "the record is gone")
	assert.False(t, errors.Is(checkRefused(dir), ErrUnreadableFormat))
}

// TestFormatRejoinedMemberMustAnswerAgain: a member removed and added again
// (running another build now, perhaps) counts only with an answer given
// since: its answer from before its removal says nothing of what it runs.
func TestFormatRejoinedMemberMustAnswerAgain(t *testing.T) {
	c := formedCluster(t, 2, 3)
	leader := c.leader()
	term, _ := leader.grants.readyTerm()
	ctx := ctxT(t)
	third := c.open(2)
	require.NoError(t, leader.Join(ctx, third.ID(), string(c.trans[2].LocalAddr()), third.cfg.ClientAddr))
	c.nodes = append(c.nodes, third)
	follower := c.nodes[1-c.index(leader)]
	answer(leader, c, map[string]uint64{follower.ID(): 0}) // the follower holds the raise back
	require.NoError(t, leader.Remove(ctx, third.ID()))
	// It comes back running a build that reads level 0 only: the cluster
	// is at level 0, so it may. It has not answered the probe since.
	require.NoError(t, leader.JoinReading(ctx, third.ID(), string(c.trans[2].LocalAddr()), third.cfg.ClientAddr, 0))
	leader.RecordProgress(follower.ID(), time.Now(), follower.Progress(), version.Version) // the follower upgraded
	assert.Equal(t, uint64(0), leader.raiseFormat(term), "the rejoined member has not answered since it joined")
	time.Sleep(2 * formatCheckInterval) // nor does the loop raise
	assert.Equal(t, []uint64{0, 0, 0}, levels(c))
}

// TestFormatRaiseConfirmed: a decided raise waits for every member to
// answer again; a member whose next answer reads less (restarted on an
// older build since its last answer) stops it.
func TestFormatRaiseConfirmed(t *testing.T) {
	c := formedCluster(t, 3, 3)
	leader := c.leader()
	term, _ := leader.grants.readyTerm()
	answer(leader, c, nil) // every member read level 1 a moment ago
	rolledBack := c.nodes[(c.index(leader)+1)%3].ID()
	go func() {
		time.Sleep(200 * time.Millisecond)
		answer(leader, c, map[string]uint64{rolledBack: 0}) // then one restarted on an older build
	}()
	start := time.Now()
	assert.Equal(t, uint64(0), leader.raiseFormat(term), "not confirmed by the rolled-back member")
	assert.GreaterOrEqual(t, time.Since(start), formatConfirmWait, "it waited for the confirmation")
	assert.Equal(t, []uint64{0, 0, 0}, levels(c))
	defer probing(c, leading(c), nil)()
	require.Eventually(t, func() bool { return leader.FormatInUse() == 1 }, 10*time.Second, 10*time.Millisecond,
		"raised once every member confirms")
}

// recordAsked records, on leader, id's answer to a probe question that
// was sent at asked (the answer arrives now). The bridge's probe knows
// when it asked; an answer says what the member ran when it answered,
// which is after asked and may be before now.
func recordAsked(leader *Node, id string, asked time.Time, p Progress) {
	leader.RecordProgress(id, asked, p, version.Version)
}

// TestFormatConfirmationAskedAfterDecision: the confirmation of a raise
// counts only answers to questions asked after the leader decided. An
// answer asked before (slow on the way back) may have been given before
// the decision, by a member rolled back since: it confirms nothing, and
// the member's next answer (level 0) stops the raise.
func TestFormatConfirmationAskedAfterDecision(t *testing.T) {
	c := formedCluster(t, 3, 3)
	leader := c.leader()
	term, _ := leader.grants.readyTerm()
	rolledBack := c.nodes[(c.index(leader)+1)%3]
	other := c.nodes[(c.index(leader)+2)%3]
	asked := time.Now() // the probe asks rolledBack; its answer is slow
	answer(leader, c, nil)
	raised := make(chan uint64, 1)
	go func() { raised <- leader.raiseFormat(term) }()
	// The leader has decided (a Barrier of a few ms) and waits for the
	// confirmation when the slow answer, given before it rolled back,
	// arrives, with the other member's answer to a new question.
	time.Sleep(500 * time.Millisecond)
	recordAsked(leader, other.ID(), time.Now(), other.Progress())
	recordAsked(leader, rolledBack.ID(), asked, rolledBack.Progress())
	// Its answer to the next question: it reads level 0 only now.
	time.Sleep(500 * time.Millisecond)
	old := rolledBack.Progress()
	old.FormatReadable = 0
	recordAsked(leader, rolledBack.ID(), time.Now(), old)
	assert.Equal(t, uint64(0), <-raised, "confirmed by an answer asked before the decision")
	assert.Equal(t, []uint64{0, 0, 0}, levels(c))
}

// TestFormatAnswerAskedBeforeRejoinDoesNotCount: a join forgets what the
// server answered before; an answer to a question asked before the join
// (the process that held the ID then, slow to answer) arriving after it
// says nothing of the server that joined, and neither decides nor
// confirms a raise.
func TestFormatAnswerAskedBeforeRejoinDoesNotCount(t *testing.T) {
	c := formedCluster(t, 2, 3)
	leader := c.leader()
	term, _ := leader.grants.readyTerm()
	ctx := ctxT(t)
	third := c.open(2)
	require.NoError(t, leader.Join(ctx, third.ID(), string(c.trans[2].LocalAddr()), third.cfg.ClientAddr))
	c.nodes = append(c.nodes, third)
	follower := c.nodes[1-c.index(leader)]
	first := time.Now() // two probe rounds ask the process that holds third's ID
	time.Sleep(10 * time.Millisecond)
	second := time.Now()
	time.Sleep(10 * time.Millisecond)
	// third is replaced under its ID by a build that reads level 0 only
	// (at level 0 it may join).
	require.NoError(t, leader.Remove(ctx, third.ID()))
	require.NoError(t, leader.JoinReading(ctx, third.ID(), string(c.trans[2].LocalAddr()), third.cfg.ClientAddr, 0))
	// The first round's answer, from the process replaced, arrives.
	recordAsked(leader, third.ID(), first, third.Progress())
	recordAsked(leader, follower.ID(), time.Now(), follower.Progress())
	raised := make(chan uint64, 1)
	go func() { raised <- leader.raiseFormat(term) }()
	time.Sleep(500 * time.Millisecond)
	// The second round's, during the confirmation, with the follower's.
	recordAsked(leader, follower.ID(), time.Now(), follower.Progress())
	recordAsked(leader, third.ID(), second, third.Progress())
	assert.Equal(t, uint64(0), <-raised, "raised on answers asked before the join")
	assert.Equal(t, []uint64{0, 0, 0}, levels(c))
}

// TestFormatUnreadableLevelInABatchStops: a raise this build cannot read
// stops the node wherever the entry holds it, here first in a batch (a
// later build may batch its raise): the commands after it are not applied.
func TestFormatUnreadableLevelInABatchStops(t *testing.T) {
	n := openNode(t, t.TempDir())
	raise := fsm.Command{Op: fsm.OpFormat, Level: uint8(fsm.FormatReadable + 1)}
	after := fsm.Command{Op: fsm.OpAcquire, Key: "k", Owner: "o", TTL: 60000}
	f := n.raft.Apply(fsm.JoinEntries(nil, [][]byte{raise.Encode(nil), after.Encode(nil)}), 5*time.Second)
	_ = f.Error() // the node shuts Raft down as it stops: the future may fail
	select {
	case stopped := <-n.Stopped():
		require.ErrorIs(t, stopped, ErrUnreadableFormat)
		assert.Contains(t, stopped.Error(), "raises the cluster's format level to 2")
	case <-time.After(10 * time.Second):
		t.Fatal("the node did not stop")
	}
	_, held := n.table.Get("k")
	assert.False(t, held, "nothing after the raise is applied")
	assert.Equal(t, uint64(1), n.FormatInUse())
}

// TestFormatHaltedLeaderIsNotReady: between the halt and the end of Raft's
// shutdown (a goroutine), the node may still lead, and be elected: it must
// not serve from a table it stopped applying. The test holds Raft up (the
// window, which no real part holds open on demand) by not shutting it down.
func TestFormatHaltedLeaderIsNotReady(t *testing.T) {
	n := openNode(t, t.TempDir())
	noShutdown := func() {}
	n.fsm.onHalt.Store(&noShutdown)
	term, ok := n.grants.readyTerm()
	require.True(t, ok)
	c := fsm.Command{Op: fsm.OpFormat, Level: uint8(fsm.FormatReadable + 1)}
	_ = n.raft.Apply(c.Encode(nil), 5*time.Second).Error()
	select {
	case err := <-n.Stopped():
		require.ErrorIs(t, err, ErrUnreadableFormat)
	case <-time.After(10 * time.Second):
		t.Fatal("the node did not stop")
	}
	require.Equal(t, raft.Leader, n.raft.State(), "Raft is held up: the window")
	assert.Error(t, n.Ready(), "a halted leader is not ready")
	assert.False(t, n.grants.becomeReady(term, true), "a halted node does not become ready again (a new election in the window)")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, granted, err := n.Acquire(ctx, "k", "o", time.Minute, 0)
	assert.False(t, granted, "a halted leader grants nothing")
	assert.Error(t, err)
}
