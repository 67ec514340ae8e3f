package server

import (
	"time"

	"github.com/fencerlock/fencer/fsm"
)

// appliedLocked updates lease timers, quotas and waiters after an entry.
func (g *grants) appliedLocked(r *fsm.Result) {
	g.quotas.applied(r, g.table)
	key := r.Cmd.Key
	if g.clients.n > 0 {
		g.dropEndedClientsLocked(key)
	}
	if r.Freed != nil {
		g.lessor.drop(key, r.Freed)
	}
	switch {
	case r.Code == fsm.Written:
		// A put: a new TTL is timed from now; a kept one keeps its
		// deadline, under the lease's new ref if the value changed.
		switch {
		case !g.readiness.ready && faultActive(faultSkipLeaseRestart):
		case r.Lease.TTL > 0 && r.Lease.Deadline != 0:
			g.lessor.keep(key, r.Lease.Ref(), r.Lease.Deadline)
		default:
			g.lessor.set(key, r.Lease, time.Now())
		}
		g.kickIfSoonerLocked(key, r.Lease.Ref())
	case r.Waiter == fsm.WaiterGranted,
		r.Code == fsm.Granted, r.Code == fsm.Renewed, r.Code == fsm.Extended:
		// (The skip-lease-restart fault also stops followers from timing
		// leases, so that a new leader that skips the restart inherits no
		// deadlines at all and frees leases early, as the bug would.)
		// A shared key's grant is its holder's lease.
		lease := r.Lease
		if r.Holder != nil {
			lease = r.Holder.Lease
		}
		if g.readiness.ready || !faultActive(faultSkipLeaseRestart) {
			g.lessor.set(key, lease, time.Now())
		}
		g.kickIfSoonerLocked(key, lease.Ref())
	}
	if r.Cmd.Waiter != nil {
		g.answerWaiterLocked(r)
	}
	// The key is free, or a shared key whose holders would let its first
	// waiter join, but someone waits: the entry that freed it was proposed
	// before the waiter queued (or was a session's end that carried no
	// waiter for it, or handed a read-write lock to the first of several
	// readers). Hand it over now.
	if r.Lease.Token == 0 || r.Lease.Kind == fsm.KindShared {
		g.grantHeadLocked(key)
	}
}

// sessionAppliedLocked times a session an entry opened or renewed, and
// forgets one it ended; the locks an end freed follow as results of their
// own (appliedLocked, for each of r.Sub).
func (g *grants) sessionAppliedLocked(r *fsm.Result) {
	switch r.Code {
	case fsm.Opened, fsm.Extended:
		id := r.Cmd.Session
		if r.Code == fsm.Opened {
			id = r.Position
		}
		if s, ok := g.table.Session(id); ok && (g.readiness.ready || !faultActive(faultSkipLeaseRestart)) {
			g.lessor.setSession(id, s.Version, s.TTL, time.Now())
			if d, ok := g.lessor.nextSession(); ok && g.readiness.ready && d.Before(g.armed) {
				g.kick()
			}
		}
	case fsm.Closed, fsm.Expired, fsm.Revoked:
		g.lessor.sessionEnded(r.Cmd.Session)
		// Waits under the session can never be granted: answer them now
		// rather than when their key is next freed. A free key whose
		// queue they headed goes to the next waiter.
		for _, key := range g.waits.failSession(r.Cmd.Session, ErrNoSession) {
			g.grantHeadLocked(key)
		}
	}
}

// restoredLocked makes the bookkeeping follow a table restored from a
// snapshot: whatever was timed before is void, so every lease starts its
// full TTL, and the quotas are counted again.
func (g *grants) restoredLocked() {
	g.quotas.recount(g.table)
	g.clients = grantClients{}
	now := time.Now()
	g.lessor.restartAll(now)
	g.kick()
}

// answerWaiterLocked answers the waiter an applied entry granted or refused.
func (g *grants) answerWaiterLocked(r *fsm.Result) {
	key, owner := r.Cmd.Key, r.Cmd.Waiter.Owner
	delete(g.granting, key)
	if r.Waiter == fsm.WaiterNone {
		return // the key was held: the waiter still waits
	}
	// The queue holds one waiter per (key, owner): the one there now may
	// acquire under another session than the entry's, having taken the
	// place of the one the entry names. The entry's outcome is not its.
	// Nor is it the waiter's if that one asks for another mode (a read
	// wait replaced by a write wait of the same owner).
	w := g.waits.takeFor(key, owner, r.Cmd.Waiter.Session, r.Cmd.Waiter.Mode, r.Cmd.Waiter.Permits)
	switch r.Waiter {
	case fsm.WaiterGranted:
		gr := grantOf(r)
		if w != nil {
			g.grantedWaiter = true
			w.answer(waitOutcome{granted: true, grant: gr})
		} else {
			// Its waiter has gone, or one asking for another session or
			// mode took its place (which this grant is not for).
			g.abandonedLocked(ownerKey{key, owner}, gr.Token)
		}
	case fsm.WaiterRefused:
		if w != nil {
			w.answer(waitOutcome{})
		}
	case fsm.WaiterNoSession:
		if w != nil {
			w.answer(waitOutcome{err: ErrNoSession})
		}
	}
}

// grantHeadLocked proposes the grant of key to its first waiter if the key
// would take it now (free, or a shared key it may join) and no grant of
// key is in flight, on a ready leader.
func (g *grants) grantHeadLocked(key string) {
	if g.granting[key] || !g.readyLocked() {
		return
	}
	if h := g.waits.head(key); h != nil && h.keys != nil {
		g.wakeManyLocked(h)
		return
	}
	w := g.headWaiterLocked(key)
	if w == nil {
		return
	}
	admits := true
	g.table.Peek(key, func(l *fsm.Lease) { admits = l == nil || l.Admits(*w) })
	if !admits {
		return
	}
	g.granting[key] = true
	g.propose(fsm.Command{Op: fsm.OpGrant, Key: key, Waiter: w})
}

// grantFailed notes that the OpGrant of key did not commit.
func (g *grants) grantFailed(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.granting, key)
}
