package server

import (
	"time"

	"github.com/fencerlock/fencer/fsm"
)

// due returns an Expire, handing the key to its head waiter, for every lease
// whose deadline has passed, and how long until the next deadline; none and
// an hour unless the node is a ready leader.
func (g *grants) due() ([]fsm.Command, time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now()
	var cmds []fsm.Command
	ready := g.readyLocked()
	if ready {
		locks, sessions := g.lessor.due(now)
		for _, d := range locks {
			c := fsm.Command{Op: fsm.OpExpire, Key: d.key, Lease: &fsm.LeaseRef{Token: d.ref.Token, Version: d.ref.Version}}
			c.Waiter = g.headWaiterLocked(d.key)
			cmds = append(cmds, c)
		}
		for _, d := range sessions {
			cmds = append(cmds, fsm.Command{Op: fsm.OpSessionExpire, Session: d.id,
				Lease: &fsm.LeaseRef{Version: d.version}, Waiters: g.sessionWaitersLocked(d.id)})
		}
	}
	wait := time.Hour
	if next, ok := g.lessor.next(); ok && ready {
		wait = max(next.Sub(now), 0)
	}
	g.armed = now.Add(wait)
	return cmds, wait
}

// retryExpire times the lease or session c (an Expire or SessionExpire)
// ends again after c failed to commit.
func (g *grants) retryExpire(c fsm.Command) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c.Op == fsm.OpSessionExpire {
		g.lessor.retrySession(c.Session, c.Lease.Version, time.Now())
		return
	}
	g.lessor.retry(c.Key, *c.Lease, time.Now())
}

// kickIfSoonerLocked wakes the expiry loop if the new deadline of key's
// lease ref comes before the loop's next wake-up.
func (g *grants) kickIfSoonerLocked(key string, ref fsm.LeaseRef) {
	if d, ok := g.lessor.deadline(key, ref); ok && g.readiness.ready && d.Before(g.armed) {
		g.kick()
	}
}

// expired returns the ref of key's lease (of owner's holder of a shared
// key) if it has run out on this leader
// (its Expire not yet committed), with the head waiter the expiry hands the
// key to; nil if the key is free or its lease runs.
func (g *grants) expired(key, owner string) (*fsm.LeaseRef, *fsm.Waiter) {
	g.mu.Lock()
	defer g.mu.Unlock()
	l, held := g.table.Get(key)
	if held && l.Kind == fsm.KindShared {
		// A shared key's lease is its holder's: owner's.
		h := l.Holder(owner, 0)
		if h == nil {
			return nil, nil
		}
		l = h.Lease
	}
	if !held || !g.lessor.ranOut(lockTimes(l), time.Now()) {
		return nil, nil
	}
	ref := l.Ref()
	return &ref, g.headWaiterLocked(key)
}

// lease returns key's lock in the table and the time left on it on this
// node's lease clock, read together (the clock too, under the lock).
func (g *grants) lease(key string) (l fsm.Lease, held bool, remaining time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	l, held = g.table.Get(key)
	if held {
		remaining = g.lockLeftLocked(l, time.Now())
	}
	return l, held, remaining
}

// lockLeftLocked returns how long lock (or shared key holder) l has left
// on this node's lease clock: its lease's time, or under a session the
// session's, and at least a millisecond (held until its session's end
// commits).
func (g *grants) lockLeftLocked(l fsm.Lease, now time.Time) time.Duration {
	if l.Session == 0 {
		return g.lessor.left(lockTimes(l), now)
	}
	rem, _ := g.sessionLeftLocked(l.Session, now)
	return max(rem, time.Millisecond)
}

// sessionLeftLocked returns how long session id has left on this node's
// lease clock, and whether it is open.
func (g *grants) sessionLeftLocked(id uint64, now time.Time) (time.Duration, bool) {
	s, ok := g.table.Session(id)
	if !ok {
		return 0, false
	}
	return g.lessor.left(sessionTimes(s), now), true
}

// ranOut reports whether lease t has run out on this node's lease clock
// (lessor.ranOut); left how long it has left. They need no lock: they read
// only t, which the caller read under mu, and the clock.
func (g *grants) ranOut(t timed, now time.Time) bool { return g.lessor.ranOut(t, now) }

func (g *grants) left(t timed, now time.Time) time.Duration { return g.lessor.left(t, now) }
