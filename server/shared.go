package server

import (
	"context"
	"fmt"
	"time"

	"github.com/fencerlock/fencer/fsm"
)

// MaxPermits bounds a semaphore's permits.
const MaxPermits = 1024

// SharedAcquire is an acquire of a shared key: a reader or the writer of a
// read-write lock, or a permit of a semaphore.
type SharedAcquire struct {
	Key, Owner string
	Mode       fsm.Mode // fsm.ModeRead, fsm.ModeWrite or fsm.ModePermit
	Permits    int      // a semaphore's number of permits
	// TTL is the lease's; zero under Session.
	TTL     time.Duration
	Session uint64
	// Wait, if positive, queues the acquire in arrival order for up to
	// Wait while the key cannot take it.
	Wait time.Duration
}

// AcquireShared grants a holder of a shared key (see fsm.Shared) and
// returns its grant (for a permit, its slot). Waits are served in arrival
// order: an acquire queues behind anyone already waiting for the key, even
// if the holders would let it join, so a waiting writer is not passed by
// readers. The holder's own acquire renews its lease and returns the same
// grant; a writer's read acquire downgrades it to a reader, keeping its
// token; a reader's write acquire is refused with ErrInvalidArgument (an upgrade
// deadlocks as soon as two readers try it).
func (n *Node) AcquireShared(ctx context.Context, a SharedAcquire) (Grant, bool, error) {
	switch {
	case a.Mode != fsm.ModeRead && a.Mode != fsm.ModeWrite && a.Mode != fsm.ModePermit:
		return Grant{}, false, invalid("mode", "%v is not read, write or permit", a.Mode)
	case a.Mode == fsm.ModePermit && (a.Permits < 1 || a.Permits > MaxPermits):
		return Grant{}, false, invalid("permits", "%d is outside 1..%d", a.Permits, MaxPermits)
	case a.Mode != fsm.ModePermit && a.Permits != 0:
		return Grant{}, false, invalid("permits", "only a semaphore has permits")
	case a.Session != 0 && a.TTL != 0:
		return Grant{}, false, invalid("ttl", "must be 0 under a session")
	}
	req := acquireReq{key: a.Key, owner: a.Owner, ttl: uint64(a.TTL / time.Millisecond), session: a.Session,
		mode: a.Mode, permits: uint64(a.Permits)}
	return n.acquire(ctx, req, a.TTL, a.Wait)
}

// planSharedLocked is plan for a shared acquire.
func (g *grants) planSharedLocked(a acquireReq, waits bool) acquireStep {
	key := a.key
	c := fsm.Command{Op: fsm.OpAcquire, Key: key, Owner: a.owner, TTL: a.ttl, Session: a.session, Mode: a.mode, Permits: a.permits}
	// What the plan needs of the key, read in place: copying a key with
	// many holders for every acquire costs more than the rest of it.
	var (
		held, admits bool
		mismatch     error
		own          *fsm.Holder   // a copy of the owner's holder
		room         *fsm.LeaseRef // a holder whose lease ran out here and whose going makes room
	)
	now := time.Now()
	g.table.Peek(key, func(l *fsm.Lease) {
		if l == nil {
			return
		}
		held = true
		if mismatch = sharedMismatch(*l, a); mismatch != nil {
			return
		}
		if h := l.Holder(a.owner, a.session); h != nil {
			hc := *h
			own = &hc
		}
		if admits = l.Admits(fsm.Waiter{Owner: a.owner, Session: a.session, Mode: a.mode, Permits: a.permits}); admits {
			return
		}
		for _, h := range l.Shared.Holders {
			if h.Session == 0 && g.ranOut(lockTimes(h.Lease), now) && (a.mode != fsm.ModeWrite || len(l.Shared.Holders) == 1) {
				ref := h.Ref()
				room = &ref
				break
			}
		}
	})
	if mismatch != nil {
		return acquireStep{act: actFail, err: mismatch}
	}
	if own != nil && own.Mode == fsm.ModeRead && a.mode == fsm.ModeWrite {
		return acquireStep{act: actFail, err: invalid("owner", "holds a read lock on %s; a read lock cannot be upgraded (release it, then take the write lock)", key)}
	}
	if a.session != 0 {
		s, open := g.table.Session(a.session)
		switch {
		case !open:
			return acquireStep{act: actFail, err: ErrNoSession}
		case s.Locks >= g.maxSessionLocks && own == nil:
			return acquireStep{act: actFail, err: fmt.Errorf("%w: the session holds its maximum of %d locks", ErrLimit, g.maxSessionLocks)}
		}
	}
	queued := g.waits.head(key) != nil
	ownExpired := own != nil && own.Session == 0 && g.ranOut(lockTimes(own.Lease), now)
	switch {
	case own != nil && !ownExpired:
		// The holder's renewal (or downgrade): no queue involved.
		return acquireStep{act: actPropose, cmd: c}
	case queued:
		// Waiters come first, also before a holder whose lease ran out.
		if waits {
			return acquireStep{act: actQueue, waiter: g.enqueueLocked(a)}
		}
		return acquireStep{act: actRefuse}
	case ownExpired:
		// As for a plain lock: the lease ran out on this leader, so it
		// ends in the same entry and the acquire is a new grant.
		ref := own.Ref()
		c.Lease = &ref
	case held && !admits:
		// A holder whose lease ran out here and whose going makes room
		// ends in the same entry; otherwise the key is full.
		if c.Lease = room; c.Lease == nil {
			if waits {
				return acquireStep{act: actQueue, waiter: g.enqueueLocked(a)}
			}
			return acquireStep{act: actRefuse}
		}
	}
	if err := g.checkNewLocked(key, 0); err != nil { // passes a held key
		return acquireStep{act: actFail, err: err}
	}
	return acquireStep{act: actPropose, cmd: c}
}

// sharedMismatch returns the error for a shared acquire a of the held key
// l if l is of another kind: ErrWrongType, or ErrInvalid for a semaphore
// with another number of permits.
func sharedMismatch(l fsm.Lease, a acquireReq) error {
	switch {
	case l.Kind != fsm.KindShared:
		return ErrWrongType
	case (a.mode == fsm.ModePermit) != (l.Shared.Permits != 0):
		return ErrWrongType
	case a.mode == fsm.ModePermit && l.Shared.Permits != a.permits:
		return invalid("permits", "the semaphore %s has %d permits, not %d", a.key, l.Shared.Permits, a.permits)
	}
	return nil
}

// Holding is one holder of a key as Holders lists it.
type Holding struct {
	Owner string
	Token uint64
	// Remaining is the time left on the leader's clock (under a session,
	// the session's); NoExpiry for a value stored without a TTL.
	Remaining time.Duration
	Session   uint64
	Mode      fsm.Mode // fsm.ModeNone for a plain lock
	Slot      int      // a permit's
	// Client is the client that took it, as this node recorded it when it
	// led and made the grant (clients.go); nil if it has no record. Only
	// listings (Node.Locks) fill it.
	Client *ClientInfo
}

// Holders returns the holders of key: a plain lock's one, a shared key's
// every one (in the order granted); none if the key is free. Holders whose
// lease ran out on the leader are left out. The read is linearizable.
func (n *Node) Holders(ctx context.Context, key string) ([]Holding, error) {
	if err := n.checkKey(key); err != nil {
		return nil, err
	}
	if err := n.verifyLeader(ctx); err != nil {
		return nil, err
	}
	return n.grants.holders(key)
}

func (g *grants) holders(key string) ([]Holding, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	l, held := g.table.Get(key)
	if !held {
		return nil, nil
	}
	now := time.Now()
	one := func(l fsm.Lease, mode fsm.Mode, slot uint64) (Holding, bool) {
		rem := g.lockLeftLocked(l, now)
		return Holding{Owner: l.Owner, Token: l.Token, Remaining: rem, Session: l.Session, Mode: mode, Slot: int(slot)}, rem > 0
	}
	if l.Kind != fsm.KindShared {
		if l.Kind != fsm.KindString {
			return nil, ErrWrongType
		}
		if h, ok := one(l, fsm.ModeNone, 0); ok {
			return []Holding{h}, nil
		}
		return nil, nil
	}
	var out []Holding
	for _, h := range l.Shared.Holders {
		if x, ok := one(h.Lease, h.Mode, h.Slot); ok {
			out = append(out, x)
		}
	}
	return out, nil
}
