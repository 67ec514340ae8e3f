//go:build fencer_faults

package server

import (
	"testing"
	"time"

	"github.com/fencerlock/fencer/fsm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Two keepalives straddle a session's deadline on the leader: the first
// proposes the renewal, and is held before its entry until the deadline has
// passed; the second then finds the session run out and proposes its
// expiry, which applies after the renewal and is stale (so is the leader's
// own expiry, held the same way). The session is open: both keepalives
// answer so. (issue 31, item 3)
func TestFaultKeepAliveRacingTheDeadline(t *testing.T) {
	n := openNode(t, t.TempDir(), func(c *Config) { c.MinTTL = 50 * time.Millisecond })
	id, err := n.OpenSession(ctxT(t), 300*time.Millisecond, "")
	require.NoError(t, err)
	s0, _ := n.table.Session(id)
	renewed := func() bool { s, ok := n.table.Session(id); return ok && s.Version != s0.Version }
	waitRenewed := func() { require.Eventually(t, renewed, 10*time.Second, time.Millisecond, "the renewal applied") }

	k1Held, letK1Go := make(chan struct{}), make(chan struct{})
	defer setFaultPoint(pointKeepalivePropose, func(arg any) bool {
		c := arg.(*fsm.Command)
		if c.Session != id {
			return false
		}
		switch c.Op {
		case fsm.OpSessionRenew:
			if !renewed() {
				close(k1Held)
				<-letK1Go
			}
		case fsm.OpSessionExpire:
			// The second keepalive: its expiry goes in after the renewal.
			close(letK1Go)
			waitRenewed()
		}
		return false
	})()
	defer setFaultPoint(pointExpirePropose, func(arg any) bool {
		if c := arg.(*fsm.Command); c.Op == fsm.OpSessionExpire && c.Session == id {
			<-k1Held
			waitRenewed()
		}
		return false
	})()

	type answer struct {
		alive bool
		err   error
	}
	first := make(chan answer, 1)
	go func() {
		_, alive, err := n.KeepAlive(ctxT(t), id)
		first <- answer{alive, err}
	}()
	<-k1Held
	require.Eventually(t, func() bool {
		var left time.Duration
		n.grants.locked(func() { s, _ := n.table.Session(id); left = n.grants.left(sessionTimes(s), time.Now()) })
		return left <= 0
	}, 10*time.Second, time.Millisecond, "the deadline passes on the leader")
	_, alive, err := n.KeepAlive(ctxT(t), id)
	require.NoError(t, err)
	a := <-first
	require.NoError(t, a.err)
	assert.True(t, a.alive, "the first keepalive renewed the session")
	assert.True(t, alive, "the second keepalive: the renewal committed, the session is open")
	_, open := n.table.Session(id)
	assert.True(t, open, "the session is open")
}
