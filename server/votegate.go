package server

import (
	"errors"
	"io"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// voteGate wraps the transport of a node that starts without state to form
// a cluster (Config.BootstrapExpect): until formation has seen that the node
// never ran as a member (Node.AllowVotes), it refuses the vote and pre-vote
// requests it receives. Raft with no configuration would otherwise grant a
// vote, with an empty log, to any candidate, including one of a cluster in
// which this node ran and lost its state (docs/safety.md, "Clusters that
// form themselves"). Every other RPC passes through; once open, the gate
// stays open.
type voteGate struct {
	raft.Transport
	open atomic.Bool
	out  chan raft.RPC
	stop chan struct{}
}

// errNotVoting answers a vote request while the gate is shut.
var errNotVoting = errors.New("server: forming: not voting until formation has checked this node")

func newVoteGate(t raft.Transport) *voteGate {
	g := &voteGate{Transport: t, out: make(chan raft.RPC), stop: make(chan struct{})}
	go g.relay()
	return g
}

// relay passes the inner transport's RPCs on, refusing votes while shut.
func (g *voteGate) relay() {
	in := g.Transport.Consumer()
	for {
		select {
		case rpc := <-in:
			if !g.open.Load() {
				switch rpc.Command.(type) {
				case *raft.RequestVoteRequest, *raft.RequestPreVoteRequest:
					rpc.Respond(nil, errNotVoting)
					continue
				}
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

// AllowVotes lets a node forming a cluster vote (voteGate); formation calls
// it once it has seen that the node never ran as a member. A no-op
// otherwise.
func (n *Node) AllowVotes() {
	if g, ok := n.trans.(*voteGate); ok && !g.open.Swap(true) {
		n.log.Info("forming: this node may vote now")
	}
}
