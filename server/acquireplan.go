package server

import (
	"fmt"
	"time"

	"github.com/fencerlock/fencer/fsm"
)

// acquireReq is an acquire as plan and the wait queue see it.
type acquireReq struct {
	key, owner string
	ttl        uint64 // milliseconds; zero under a session
	session    uint64 // zero: none
	value      string // the lock's value under a session
	redis      bool
	// mode and permits make it a shared acquire (fsm.Command.Mode).
	mode    fsm.Mode
	permits uint64
}

// acquireStep is what plan decided an acquire does next.
type acquireStep struct {
	act    acquireAction
	cmd    fsm.Command // actPropose: the entry
	waiter *waiter     // actQueue: the queued wait
	err    error       // actFail
	// lost: the entry releases what is left of a multi-key grant the
	// owner no longer wholly holds (planMany); its answer is ErrLeaseLost.
	lost bool
}

// acquireAction says what an acquire does next.
type acquireAction int

const (
	actPropose  acquireAction = iota // propose the entry
	actQueue                         // wait for the queued waiter's answer
	actRefuse                        // answer "not granted" without an entry
	actNotReady                      // not a ready leader (any more): ask again
	actFail                          // answer the error
)

// plan decides, in one critical section, an acquire's next step: its entry,
// or a place in the wait queue (others already wait for the key, and the
// request may wait), or a refusal (the key's lease ran out but waiters come
// first; the expiry hands it to them), or an error (a key of another kind,
// a limit).
func (g *grants) plan(a acquireReq, waits bool) acquireStep {
	key, owner, ttl := a.key, a.owner, a.ttl
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.readyLocked() {
		// Stepped down since the caller's check: queueing here would
		// wait on a node nothing grants on.
		return acquireStep{act: actNotReady}
	}
	if a.mode != fsm.ModeNone {
		return g.planSharedLocked(a, waits)
	}
	c := fsm.Command{Op: fsm.OpAcquire, Key: key, Owner: owner, TTL: ttl, Redis: a.redis, Session: a.session, Data: a.value}
	l, held := g.table.Get(key)
	if held && l.Kind != fsm.KindString {
		return acquireStep{act: actFail, err: ErrWrongType}
	}
	if a.session != 0 {
		s, open := g.table.Session(a.session)
		switch {
		case !open:
			return acquireStep{act: actFail, err: ErrNoSession}
		case s.Locks >= g.maxSessionLocks && !(held && l.Owner == owner && l.Session == a.session):
			return acquireStep{act: actFail, err: fmt.Errorf("%w: the session holds its maximum of %d locks", ErrLimit, g.maxSessionLocks)}
		}
	}
	queued := g.waits.head(key) != nil
	expired := held && g.lessor.ranOut(lockTimes(l), time.Now())
	switch {
	case queued && (!held || l.Owner != owner || l.Session != a.session || expired):
		// Waiters come first, also before a holder whose lease ran out.
		if waits {
			return acquireStep{act: actQueue, waiter: g.enqueueLocked(a)}
		}
		if expired || !held {
			// The key is free (or as good as) but kept for its first
			// waiter: a grant to it is in flight, or a multi-key
			// acquire waits for its other keys.
			return acquireStep{act: actRefuse}
		}
	case expired:
		// The lease ran out on this leader but its Expire is not yet
		// committed: end it in the same entry, so the lock reads and acts
		// as free at once (a holder then gets a new token, not a renewal).
		ref := l.Ref()
		c.Lease = &ref
	}
	if err := g.checkNewLocked(key, 0); err != nil { // passes a held key
		return acquireStep{act: actFail, err: err}
	}
	return acquireStep{act: actPropose, cmd: c}
}

// queueBehind queues an acquire that found key held by another owner,
// unless the lock changed hands since or the node no longer leads; nil then.
func (g *grants) queueBehind(a acquireReq) *waiter {
	g.mu.Lock()
	defer g.mu.Unlock()
	l, held := g.table.Get(a.key)
	if !held || !g.readyLocked() {
		return nil
	}
	if a.mode != fsm.ModeNone && l.Kind == fsm.KindShared && l.Holder(a.owner, a.session) == nil ||
		a.mode == fsm.ModeNone && !(l.Owner == a.owner && l.Session == a.session) {
		return g.enqueueLocked(a)
	}
	return nil
}

func (g *grants) enqueueLocked(a acquireReq) *waiter {
	w := &waiter{key: a.key, owner: a.owner, ttl: a.ttl, session: a.session, value: a.value,
		mode: a.mode, permits: a.permits, done: make(chan waitOutcome, 1)}
	g.waits.add(w)
	if g.waits.head(a.key) == w {
		// Freed (or, for a shared key, room made) between our look and
		// now: hand it over.
		g.grantHeadLocked(a.key)
	}
	return w
}

// withdraw removes w from its queue if it is still there and reports
// whether it was; if not, its answer is on w.done.
func (g *grants) withdraw(w *waiter) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waits.remove(w)
}

// checkNewLocked applies the limits on keys to a key an acquire would add
// to the table (Config.MaxLocks, the quotas); pending counts keys the same
// request adds before it. A key already in the table passes.
func (g *grants) checkNewLocked(key string, pending int) error {
	if g.table.Has(key) {
		return nil
	}
	if g.table.Len()+pending >= g.maxLocks {
		return fmt.Errorf("%w: the lock table holds its maximum of %d locks", ErrLimit, g.maxLocks)
	}
	return g.quotas.check(key)
}
