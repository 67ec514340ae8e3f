package server

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A transfer that raft refuses before starting it did nothing: its answer is
// a definite error that names why, never the unknown outcome.
func TestTransferRefusedIsDefinite(t *testing.T) {
	definite := func(t *testing.T, err error, why string) {
		t.Helper()
		require.Error(t, err)
		assert.NotErrorIs(t, err, ErrUnknownOutcome, "nothing was done: %v", err)
		assert.ErrorIs(t, err, ErrTransferRefused, "%v", err)
		assert.Contains(t, err.Error(), why)
	}
	t.Run("one node", func(t *testing.T) {
		n := openNode(t, t.TempDir())
		definite(t, n.TransferLeadership(ctxT(t), ""), "no other voter")
		definite(t, n.TransferLeadership(ctxT(t), n.ID()), "already the leader")
	})
	c := newCluster(t, 3)
	leader := c.leader()
	t.Run("to itself", func(t *testing.T) {
		definite(t, leader.TransferLeadership(ctxT(t), leader.ID()), "already the leader")
	})
	t.Run("to a nonvoter", func(t *testing.T) {
		var follower *Node
		for _, n := range c.nodes {
			if n != leader {
				follower = n
			}
		}
		require.NoError(t, leader.raft.DemoteVoter(raft.ServerID(follower.ID()), 0, 5*time.Second).Error())
		definite(t, leader.TransferLeadership(ctxT(t), follower.ID()), "not a voter")
	})
	t.Run("in progress", func(t *testing.T) {
		// raft's own refusals, as translated, are definite too.
		definite(t, leader.refusedTransfer(leader.translate(raft.ErrLeadershipTransferInProgress)), "in progress")
		definite(t, leader.refusedTransfer(leader.translate(errors.New("cannot find peer"))), "no other voter")
		assert.ErrorIs(t, leader.refusedTransfer(leader.translate(raft.ErrLeadershipLost)), ErrUnknownOutcome)
	})
}
