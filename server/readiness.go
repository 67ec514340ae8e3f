package server

import (
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// readiness is whether this node is a ready leader: the leadership watcher
// made it ready (it applied its whole log and restarted every lease) in
// term, and it still leads in that term (holds). Guarded by grants.mu, under
// which its changes also answer the wait queue (grants.notReady,
// grants.close).
type readiness struct {
	ready bool // leader that has applied its whole log and restarted leases
	// term is the Raft term in which ready was set: readiness holds only
	// while the node still leads in that term, whatever the leader
	// channel has or has not said since.
	term    uint64
	changed chan struct{} // closed and replaced when leadership or readiness changes
	closed  bool
	// halted: the applier stopped (a format it cannot read); the node is
	// never ready again.
	halted bool
}

// holds reports whether the node is a ready leader: made ready, and still
// leading in the term it was made ready in. The second half covers the
// time before the watcher hears of a step-down, or when raft's channel
// lost the notice.
func (r *readiness) holds(rf *raft.Raft) bool {
	return r.ready && rf.State() == raft.Leader && rf.CurrentTerm() == r.term
}

// signal wakes everyone waiting for a leadership change.
func (r *readiness) signal() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// readyLocked reports whether the node is a ready leader (readiness.holds).
func (g *grants) readyLocked() bool { return g.readiness.holds(g.raft) }

// state returns, at one moment, whether the node is a ready leader, whether
// it is closed, and the channel closed at the next change of either.
func (g *grants) state() (ready, closed bool, changed <-chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.readyLocked(), g.readiness.closed, g.readiness.changed
}

// notReady ends readiness. Waiters queued while the node was ready are
// answered ErrUnknownOutcome: a grant to one of them may be in an entry
// whose fate is now unknown.
func (g *grants) notReady() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.readiness.ready {
		return
	}
	g.readiness.ready = false
	g.waits.failAll(ErrUnknownOutcome)
	g.readiness.signal()
}

// becomeReady makes the node a ready leader in term, restarting every lease
// at its full TTL (unless restart is false: a fault build's bug), if it
// still leads in that term and is not closed. It reports whether it did.
func (g *grants) becomeReady(term uint64, restart bool) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.raft.State() != raft.Leader || g.raft.CurrentTerm() != term || g.readiness.closed || g.readiness.halted {
		return false
	}
	if restart {
		now := time.Now()
		g.lessor.restartAll(now)
	}
	// Grants in flight belonged to the term before.
	clear(g.granting)
	g.readiness.ready, g.readiness.term = true, term
	g.readiness.signal()
	return true
}

// halt ends readiness for good: the applier stopped applying (a format this
// build cannot read), so the table is no longer the log's. Waiters are
// answered as on a step-down.
func (g *grants) halt() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.haltLocked()
}

// haltLocked is halt for a caller that holds mu (the applier, applying).
func (g *grants) haltLocked() {
	g.readiness.halted = true
	if !g.readiness.ready {
		return
	}
	g.readiness.ready = false
	g.waits.failAll(ErrUnknownOutcome)
	g.readiness.signal()
}

// close marks the node closed and answers every waiter (an entry handing a
// lock to one of them may be in flight). It reports false if the node was
// already closed.
func (g *grants) close() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.readiness.closed {
		return false
	}
	g.readiness.closed = true
	g.readiness.ready = false
	g.waits.failAll(fmt.Errorf("%w: %w", ErrUnknownOutcome, ErrShutdown))
	g.readiness.signal()
	return true
}

// isClosed reports whether close was called.
func (g *grants) isClosed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.readiness.closed
}
