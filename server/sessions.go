package server

import (
	"context"
	"fmt"
	"time"

	"github.com/fencerlock/fencer/fsm"
)

// SessionStatus describes an open session.
type SessionStatus struct {
	TTL time.Duration
	// Remaining is the time left on the leader's clock.
	Remaining time.Duration
	// Locks are the locks held under the session, in key order.
	Locks []SessionLock
}

// SessionLock is a lock held under a session.
type SessionLock struct {
	Key, Owner string
	Token      uint64
}

// OpenSession opens a session with ttl for user (empty without
// authentication) and returns its ID: the position of the entry that opened
// it, never reused. The session ends, releasing every lock held under it,
// when it is not kept alive for ttl, or when it is closed or revoked.
func (n *Node) OpenSession(ctx context.Context, ttl time.Duration, user string) (id uint64, err error) {
	defer func(start time.Time) { n.metrics.observe("session-open", start, err == nil, err) }(time.Now())
	if ttl < n.cfg.MinTTL || ttl > n.cfg.MaxTTL {
		return 0, invalid("ttl", "%v is outside %v..%v", ttl, n.cfg.MinTTL, n.cfg.MaxTTL)
	}
	if len(user) > n.cfg.MaxOwnerLen {
		return 0, invalid("user", "%d bytes, longer than %d", len(user), n.cfg.MaxOwnerLen)
	}
	if err := n.waitReady(ctx); err != nil {
		return 0, err
	}
	if open := n.table.Sessions(); open >= n.cfg.MaxSessions {
		return 0, fmt.Errorf("%w: %d sessions are open, the maximum", ErrLimit, open)
	}
	r, err := n.propose(ctx, fsm.Command{Op: fsm.OpSessionOpen, TTL: uint64(ttl / time.Millisecond), Owner: user})
	if err != nil {
		return 0, err
	}
	return r.Position, nil
}

// KeepAlive restarts session id's TTL. It reports false if the session is
// not open, including when it already ran out on the leader (its end is
// then committed in the same entry). taken is how many locks were freed
// from under the session by others (revoked, overwritten) since it opened:
// when it grows, the holder has lost locks it may not know of
// (Session's Locks lists those left).
func (n *Node) KeepAlive(ctx context.Context, id uint64) (taken uint64, alive bool, err error) {
	defer func(start time.Time) { n.metrics.observe("session-keepalive", start, alive, err) }(time.Now())
	if id == 0 {
		return 0, false, invalid("session", "zero")
	}
	if err := n.waitReady(ctx); err != nil {
		return 0, false, err
	}
	// An expiry this keepalive proposes because the session ran out on
	// the leader applies as stale if a renewal (another keepalive's, in
	// flight) committed before it: the session is open, and this
	// keepalive renews it in turn rather than answer "not open".
	for attempt := 0; ; attempt++ {
		c := fsm.Command{Op: fsm.OpSessionRenew, Session: id}
		n.grants.locked(func() {
			s, open := n.table.Session(id)
			if open && n.grants.ranOut(sessionTimes(s), time.Now()) {
				// Ran out on this leader: a keepalive does not bring it back.
				c = fsm.Command{Op: fsm.OpSessionExpire, Session: id, Lease: &fsm.LeaseRef{Version: s.Version},
					Waiters: n.grants.sessionWaitersLocked(id)}
			}
		})
		faultPoint(pointKeepalivePropose, &c)
		r, err := n.propose(ctx, c)
		if err != nil {
			return 0, false, err
		}
		switch {
		case c.Op == fsm.OpSessionRenew && r.Code == fsm.Extended:
			return r.Taken, true, nil
		case c.Op == fsm.OpSessionExpire && r.Code == fsm.Stale && attempt < 2:
			continue // renewed since it was read (or ended: the renewal says so)
		}
		return 0, false, nil
	}
}

// CloseSession ends session id at its holder's request: every lock held
// under it is released, as Release releases (remembered, so a retried
// release or acquire by the same owner is answered as after a release),
// and handed to its first waiter. It reports false if the session was not
// open (closed before, or ended).
func (n *Node) CloseSession(ctx context.Context, id uint64) (bool, error) {
	return n.endSession(ctx, "session-close", fsm.OpSessionClose, id)
}

// RevokeSession ends session id administratively: its locks are freed as
// an expiry frees them. It reports false if the session was not open.
func (n *Node) RevokeSession(ctx context.Context, id uint64) (bool, error) {
	return n.endSession(ctx, "session-revoke", fsm.OpSessionRevoke, id)
}

func (n *Node) endSession(ctx context.Context, metric string, op fsm.Op, id uint64) (ended bool, err error) {
	defer func(start time.Time) { n.metrics.observe(metric, start, ended, err) }(time.Now())
	if id == 0 {
		return false, invalid("session", "zero")
	}
	if err := n.waitReady(ctx); err != nil {
		return false, err
	}
	c := fsm.Command{Op: op, Session: id}
	n.grants.locked(func() { c.Waiters = n.grants.sessionWaitersLocked(id) })
	r, err := n.propose(ctx, c)
	if err != nil {
		return false, err
	}
	return r.Code != fsm.NoSession, nil
}

// Session returns session id's status; open is false if it is not open.
// The read is linearizable, as Status's is.
func (n *Node) Session(ctx context.Context, id uint64) (s SessionStatus, open bool, err error) {
	if !faultActive(faultStaleReads) {
		if err := n.verifyLeader(ctx); err != nil {
			return SessionStatus{}, false, err
		}
	}
	n.grants.locked(func() {
		info, ok := n.table.Session(id)
		if !ok {
			return
		}
		open = true
		s.TTL = time.Duration(info.TTL) * time.Millisecond
		s.Remaining = max(n.grants.left(sessionTimes(info), time.Now()), time.Millisecond)
		keys, _ := n.table.SessionKeys(id)
		for _, k := range keys {
			if l, held := n.table.Get(k); held {
				s.Locks = append(s.Locks, SessionLock{Key: k, Owner: l.Owner, Token: l.Token})
			}
		}
	})
	return s, open, nil
}

// AcquireInSession grants key to owner under session, to be held until the
// session ends or the lock is released; value is the lock's value (an
// election's leader's value). Otherwise it is Acquire: a repeated acquire
// returns the same grant, and with wait > 0 the request queues. The error
// is ErrNoSession if the session is not open, or ends while the request
// waits.
func (n *Node) AcquireInSession(ctx context.Context, session uint64, key, owner, value string, wait time.Duration) (Grant, bool, error) {
	if session == 0 {
		return Grant{}, false, invalid("session", "zero")
	}
	return n.acquire(ctx, acquireReq{key: key, owner: owner, session: session, value: value}, 0, wait)
}

// ReleaseInSession frees key if owner holds it under session, as Release
// does.
func (n *Node) ReleaseInSession(ctx context.Context, session uint64, key, owner string) (bool, error) {
	if session == 0 {
		return false, invalid("session", "zero")
	}
	return n.release(ctx, key, owner, session)
}

// Proclaim sets the value of the lock owner holds on key under session,
// keeping its token: an election's leader announcing a new value. It
// reports false if owner does not hold key under session.
func (n *Node) Proclaim(ctx context.Context, session uint64, key, owner, value string) (bool, error) {
	if session == 0 {
		return false, invalid("session", "zero")
	}
	if err := n.checkNames(key, owner); err != nil {
		return false, err
	}
	if len(value) > n.cfg.MaxOwnerLen {
		return false, invalid("value", "%d bytes, longer than %d", len(value), n.cfg.MaxOwnerLen)
	}
	if err := n.waitReady(ctx); err != nil {
		return false, err
	}
	r, err := n.propose(ctx, fsm.Command{Op: fsm.OpProclaim, Key: key, Owner: owner, Session: session, Data: value})
	if err != nil {
		return false, err
	}
	return r.Code == fsm.Proclaimed, nil
}

// SessionUser returns the user that opened session id, and whether it is
// open, as this node knows it once it has applied the entry that would
// have opened it (it waits for that, within ctx). A session's user never
// changes and IDs are never reused, so any node can answer, without the
// leader: what permission checks need.
func (n *Node) SessionUser(ctx context.Context, id uint64) (user string, open bool, err error) {
	if id == 0 {
		return "", false, invalid("session", "zero")
	}
	for n.table.Position() < id {
		if ready, _, _ := n.grants.state(); ready {
			// A leader answers an open only once it applied it: an ID
			// beyond what it applied was never opened.
			return "", false, nil
		}
		select {
		case <-ctx.Done():
			return "", false, ctx.Err()
		case <-time.After(2 * time.Millisecond):
			// A follower catching up with the log: a bounded wait.
		}
	}
	s, open := n.table.Session(id)
	return s.User, open, nil
}
