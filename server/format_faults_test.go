//go:build fencer_faults

package server

import (
	"errors"
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
