//go:build fencer_faults

package server

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The leader decides to raise the format level (every member answered
// that it reads it) and loses leadership before it commits the raise: the
// raise is not committed, and the new leader decides afresh, from answers
// given to it, not to its predecessor.
func TestFaultFormatLeaderChangeMidRaise(t *testing.T) {
	c := formedCluster(t, 3, 3)
	first := c.leader()
	var moved atomic.Bool
	unset := setFaultPoint(pointRaiseFormat, func(arg any) bool {
		n := arg.(*Node)
		if n == first && moved.CompareAndSwap(false, true) {
			_ = n.raft.LeadershipTransfer().Error()
		}
		return false
	})
	defer unset()
	answer(first, c, nil)
	require.Eventually(t, moved.Load, 10*time.Second, 10*time.Millisecond, "the leader did not decide to raise")
	second := c.leader()
	for second == first {
		time.Sleep(10 * time.Millisecond)
		second = c.leader()
	}
	time.Sleep(3 * formatCheckInterval)
	assert.Equal(t, []uint64{0, 0, 0}, levels(c), "no raise committed: the deposed leader's check was for its own term, and the new one heard nobody")

	answer(second, c, nil)
	require.Eventually(t, func() bool {
		for _, l := range levels(c) {
			if l != 1 {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond, "the new leader raises once the members answer it: %v", levels(c))
}

// A join of a server that reads only level 0 arrives while the leader is
// between deciding a raise and committing it: it waits for the raise, then
// is refused, and the configuration keeps the members that were asked.
func TestFaultFormatJoinDuringRaise(t *testing.T) {
	c := formedCluster(t, 2, 3)
	leader := c.leader()
	joiner := c.open(2)
	deciding := make(chan struct{})
	release := make(chan struct{})
	var once atomic.Bool
	unset := setFaultPoint(pointRaiseFormat, func(any) bool {
		if once.CompareAndSwap(false, true) {
			close(deciding)
			<-release
		}
		return false
	})
	defer unset()
	answer(leader, c, nil)
	select {
	case <-deciding:
	case <-time.After(10 * time.Second):
		t.Fatal("the leader did not decide to raise")
	}
	joined := make(chan error, 1)
	go func() {
		joined <- leader.JoinReading(ctxT(t), joiner.ID(), string(c.trans[2].LocalAddr()), joiner.cfg.ClientAddr, 0)
	}()
	select {
	case err := <-joined:
		t.Fatalf("the join did not wait for the raise: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	close(release)
	var err error
	select {
	case err = <-joined:
	case <-time.After(10 * time.Second):
		t.Fatal("the join did not finish after the raise")
	}
	require.ErrorIs(t, err, ErrFormatRefused)
	assert.Equal(t, uint64(1), leader.FormatInUse())
	ms, err := leader.Members(ctxT(t))
	require.NoError(t, err)
	assert.Len(t, ms, 2, "the level-0 server was not added")
}

// A join checked on a leader that loses leadership before it changes the
// configuration does not change it: another leader may have raised the
// level since the check.
func TestFaultFormatJoinAcrossLeaderChange(t *testing.T) {
	c := formedCluster(t, 3, 4)
	leader := c.leader()
	joiner := c.open(3)
	unset := setFaultPoint(pointJoinFormat, func(any) bool {
		_ = leader.raft.LeadershipTransfer().Error()
		return false
	})
	defer unset()
	err := leader.JoinReading(ctxT(t), joiner.ID(), string(c.trans[3].LocalAddr()), joiner.cfg.ClientAddr, 0)
	var nl *NotLeaderError
	require.True(t, errors.As(err, &nl), "%v", err)
	unset()
	next := c.leader()
	ms, err := next.Members(ctxT(t))
	require.NoError(t, err)
	assert.Len(t, ms, 3, "the server was not added")
}

// A follower cut off before the raise comes back after it, behind the
// leader's snapshot: it is sent the snapshot (version 8, at level 1), and
// applies the level from it. The leader decided on the follower's answer,
// which its probe gets over the client port, not Raft.
func TestFaultFormatSnapshotAcrossTheRaise(t *testing.T) {
	c := formedCluster(t, 3, 3, func(cfg *Config) {
		cfg.TrailingLogs = 2
		cfg.RaftSegmentSize = minRaftSegmentSize // compaction drops whole segments
	})
	leader := c.leader()
	f := c.follower(leader)
	fi := c.index(f)
	c.isolate(fi)
	answer(leader, c, nil)
	require.Eventually(t, func() bool { return leader.FormatInUse() == 1 }, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, uint64(0), f.FormatInUse(), "the cut-off follower has not applied the raise")
	_, err := leader.Release(ctxT(t), "k", "quitter") // a give-up: level 1
	require.NoError(t, err)
	owner := strings.Repeat("o", 1000)
	for i := 0; i < 150; i++ {
		mustAcquire(t, leader, fmt.Sprint("fill", i), owner, time.Hour)
	}
	require.NoError(t, leader.raft.Snapshot().Error())
	assert.Equal(t, byte(8), leader.table.MarshalSnapshot()[4])
	var restored atomic.Bool
	unset := setFaultPoint(pointRestored, func(arg any) bool {
		if arg == f.table {
			restored.Store(true)
		}
		return false
	})
	defer unset()
	c.heal(fi)
	require.Eventually(t, restored.Load, 20*time.Second, 20*time.Millisecond, "the follower was sent the snapshot")
	require.Eventually(t, func() bool { return f.FormatInUse() == 1 && f.table.Len() == leader.table.Len() },
		20*time.Second, 20*time.Millisecond, "the follower installs the snapshot and its level")
	assert.True(t, f.table.Refuses("k", "quitter"), "with the give-up it holds")
	lIdx, lHash := leader.StateHash()
	require.Eventually(t, func() bool { i, h := f.StateHash(); return i == lIdx && h == lHash }, 10*time.Second, 20*time.Millisecond)
}
