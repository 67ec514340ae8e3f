package server

import (
	"errors"
	"io"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// voteGate wraps the transport of a node that starts without state to form
// a cluster (Config.BootstrapExpect): until formation has seen evidence that
// the node never ran as a member (Node.AllowVotes), it refuses every RPC it
// receives, the vote and pre-vote requests as well as a leader's entries,
// snapshots and heartbeats (which take the transport's fast path). Raft with
// no configuration would otherwise grant a vote, with an empty log, to any
// candidate, including one of a cluster in which this node ran and lost its
// state; and a leader of such a cluster would write its configuration, log
// and term into the node, after which a restart finds state and no longer
// checks it (docs/safety.md, "Clusters that form themselves"). Once open,
// the gate stays open.
type voteGate struct {
	raft.Transport
	open atomic.Bool
	out  chan raft.RPC
	stop chan struct{}
}

// errNotVoting answers a vote request while the gate is shut, errNotChecked
// every other RPC.
var (
	errNotVoting  = errors.New("server: forming: not voting until formation has checked this node")
	errNotChecked = errors.New("server: forming: taking nothing from a leader until formation has checked this node")
)

func newVoteGate(t raft.Transport) *voteGate {
	g := &voteGate{Transport: t, out: make(chan raft.RPC), stop: make(chan struct{})}
	go g.relay()
	return g
}

// refuse answers rpc with an error and reports true while the gate is shut.
func (g *voteGate) refuse(rpc raft.RPC) bool {
	if g.open.Load() {
		return false
	}
	switch rpc.Command.(type) {
	case *raft.RequestVoteRequest, *raft.RequestPreVoteRequest:
		rpc.Respond(nil, errNotVoting)
	default:
		// (An InstallSnapshot's data, unread, ends its connection.)
		rpc.Respond(nil, errNotChecked)
	}
	return true
}

// SetHeartbeatHandler gates the fast path heartbeats take past Consumer.
func (g *voteGate) SetHeartbeatHandler(cb func(rpc raft.RPC)) {
	if cb == nil {
		g.Transport.SetHeartbeatHandler(nil)
		return
	}
	g.Transport.SetHeartbeatHandler(func(rpc raft.RPC) {
		if !g.refuse(rpc) {
			cb(rpc)
		}
	})
}

// relay passes the inner transport's RPCs on while the gate is open.
func (g *voteGate) relay() {
	in := g.Transport.Consumer()
	for {
		select {
		case rpc := <-in:
			if g.refuse(rpc) {
				continue
			}
			select {
			case g.out <- rpc:
			case <-g.stop:
				return
			}
		case <-g.stop:
			return
		}
	}
}

// Consumer is the gated channel of RPCs.
func (g *voteGate) Consumer() <-chan raft.RPC { return g.out }

// RequestPreVote forwards a pre-vote this node sends, so that Raft keeps
// pre-voting (it checks the transport for the method).
func (g *voteGate) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	pv, ok := g.Transport.(raft.WithPreVote)
	if !ok {
		return errors.New("server: the transport does not pre-vote")
	}
	return pv.RequestPreVote(id, target, args, resp)
}

// Close stops the relay and closes the inner transport if it closes.
func (g *voteGate) Close() error {
	select {
	case <-g.stop:
	default:
		close(g.stop)
	}
	if c, ok := g.Transport.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// AllowVotes opens a forming node's gate (voteGate): it may vote and take
// a leader's entries. Formation calls it on evidence that the node never
// ran as a member (FormDecision.Vote). A no-op otherwise.
func (n *Node) AllowVotes() {
	if g, ok := n.trans.(*voteGate); ok && !g.open.Swap(true) {
		n.log.Info("forming: this node may vote now")
	}
}

// Voting reports that the node is not held by a forming gate: it started
// with state, or formation has opened its gate.
func (n *Node) Voting() bool {
	g, ok := n.trans.(*voteGate)
	return !ok || g.open.Load()
}
