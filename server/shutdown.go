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

// stepDownGrace is how long Close waits, after this node stopped leading
// without a new term, for the vote request of the election a transfer
// started before it concludes that no transfer happened.
const stepDownGrace = time.Second

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
	term := n.raft.CurrentTerm()
	var stepped time.Time // when this node was first seen not leading in term
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTransferTimeout)
	defer cancel()
	if err := n.await(ctx, n.raft.LeadershipTransfer, uncertain); err != nil {
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
		// Raft also reports a transfer done when this node stopped
		// leading for another reason: it lost contact with a quorum (the
		// other nodes are down, or stopping too). Then no election was
		// started for the transfer and no new leader will be heard of,
		// so waiting out the timeout would only delay the shutdown. A
		// transfer that worked shows a later term, as the target's
		// election is what makes this node step down (its vote request
		// may come a moment after a reply that already told of the new
		// term, hence the grace). This node standing as a candidate
		// means that no leader came either, and leading again (Raft
		// answers the transfer only once this node has stopped leading)
		// that it won the election itself.
		state := n.raft.State()
		switch {
		case state == raft.Candidate || state == raft.Leader:
			n.log.Warn("no new leader after the leadership transfer before shutdown; shutting down", "state", state.String(), "took", time.Since(start))
			return ""
		case n.raft.CurrentTerm() != term:
			stepped = time.Time{}
		case stepped.IsZero():
			stepped = time.Now()
		case time.Since(stepped) >= stepDownGrace:
			n.log.Warn("no new leader after the leadership transfer before shutdown (stopped leading with no newer term: no quorum reachable?); shutting down", "took", time.Since(start))
			return ""
		}
		select {
		case <-ctx.Done():
			n.log.Warn("leadership transferred before shutdown, but no new leader heard of yet")
			return ""
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// shutdownSnapshotMin is how many commands past the last snapshot make Close
// take a snapshot first: the next start then restores it instead of
// replaying those commands one by one from the log, which takes far longer
// (docs/performance.md, a million locks). Commands, not entries: an entry may
// hold a batch of them.
const shutdownSnapshotMin = 4096

// shutdownSnapshotTimeout bounds the wait for that snapshot.
const shutdownSnapshotTimeout = 10 * time.Second

// snapshotBeforeStop takes a snapshot if the log has grown far past the last
// one. It is an optimisation of the next start; a failure is logged only.
func (n *Node) snapshotBeforeStop() {
	last, applied := n.fsm.snapPos.Load(), n.table.Position()
	if applied < last+shutdownSnapshotMin {
		return
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), shutdownSnapshotTimeout)
	defer cancel()
	if err := n.await(ctx, func() raft.Future { return n.raft.Snapshot() }, uncertain); err != nil {
		n.log.Warn("snapshot before shutdown failed", "err", err)
		return
	}
	n.log.Info("snapshot before shutdown", "commands_since_last", applied-last, "took", time.Since(start))
}
