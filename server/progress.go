package server

import (
	"time"

	"github.com/fencerlock/fencer/fsm"
	"github.com/hashicorp/raft"
)

// Progress is how far this node's copy of the log has come, as the node
// itself sees it. The leader gathers every member's (see the bridge's
// member health) because Raft does not expose a follower's match index.
type Progress struct {
	// Role is "leader", "follower", "candidate" or "shutdown".
	Role string
	Term uint64
	// LastIndex is the last entry in this node's log, committed or not.
	LastIndex uint64
	// CommitIndex is the highest entry this node knows to be committed.
	CommitIndex uint64
	// Applied is the last entry applied, in the same numbering as
	// CommitIndex (Raft's own entries included, which the lock table's
	// last index skips).
	Applied uint64
	// LastContact is how long ago this node last heard from a leader: 0 on
	// the leader itself, negative if it never has since it started.
	LastContact time.Duration
	// FormatReadable is the highest format level the node's build reads
	// (fsm.FormatReadable); 0 for a build from before levels, which does
	// not say. The leader raises the cluster's level only to one every
	// member reads.
	FormatReadable uint64
}

// Progress returns this node's progress.
func (n *Node) Progress() Progress {
	state := n.raft.State()
	p := Progress{
		Role:        stateName(state),
		Term:        n.raft.CurrentTerm(),
		LastIndex:   n.raft.LastIndex(),
		CommitIndex: n.raft.CommitIndex(),
		Applied:     n.raft.AppliedIndex(),
		LastContact: -1,
		// FormatReadable: what this build reads.
		FormatReadable: fsm.FormatReadable,
	}
	if state == raft.Leader {
		p.LastContact = 0
	} else if t := n.raft.LastContact(); !t.IsZero() {
		p.LastContact = time.Since(t)
	}
	return p
}
