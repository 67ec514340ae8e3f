package server

import (
	"context"
	"time"

	"github.com/hashicorp/raft"
)

// shutdownTransferTimeout bounds the leadership transfer Close attempts
// before shutting a leader down. Raft itself gives up on a transfer after an
// election timeout; this is the outer bound.
const shutdownTransferTimeout = 5 * time.Second

// handOff hands leadership to the most up-to-date other voter, if this node
// leads a cluster that has one, so clients see a short handoff instead of
// waiting out an election timeout. It reports the new leader's ID, or "" if
// nothing was transferred. A failed transfer is logged; shutdown goes on.
func (n *Node) handOff() string {
	if n.raft.State() != raft.Leader {
		return ""
	}
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return ""
	}
	others := 0
	for _, s := range f.Configuration().Servers {
		if string(s.ID) != n.id && s.Suffrage == raft.Voter {
			others++
		}
	}
	if others == 0 {
		return ""
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTransferTimeout)
	defer cancel()
	if err := n.await(ctx, n.raft.LeadershipTransfer()); err != nil {
		n.log.Warn("leadership transfer before shutdown failed; shutting down anyway", "err", err)
		return ""
	}
	// Stay up (a voter) until this node hears from the new leader, so the
	// election the transfer started can count on its vote.
	for {
		_, to := n.raft.LeaderWithID()
		if to != "" && string(to) != n.id {
			n.log.Info("leadership transferred before shutdown", "to", string(to), "took", time.Since(start))
			return string(to)
		}
		select {
		case <-ctx.Done():
			n.log.Warn("leadership transferred before shutdown, but no new leader heard of yet")
			return ""
		case <-time.After(10 * time.Millisecond):
		}
	}
}
