package server

import (
	"github.com/fencerlock/fencer/fsm"
)

// deliveries tracks, per (key, owner), the acquires in progress and the
// grants made to waiters that had gone while such an acquire might still
// return them (the table renews a holder's acquire with its token). A grant
// that no acquire can return is revoked. Guarded by grants.mu.
type deliveries struct {
	live map[ownerKey]int // acquires in progress per (key, owner)
	// undelivered holds grants made to waiters that had gone, while the
	// same owner still had an acquire in progress that might return them.
	undelivered map[ownerKey]uint64
}

// started counts an acquire of ok in progress.
func (d *deliveries) started(ok ownerKey) { d.live[ok]++ }

// finished counts one acquire of ok done, which returned token (zero:
// none): an undelivered grant it returned is delivered.
func (d *deliveries) finished(ok ownerKey, token uint64) {
	d.live[ok]--
	if t, has := d.undelivered[ok]; has && token != 0 && t == token {
		delete(d.undelivered, ok)
	}
	if d.live[ok] <= 0 {
		delete(d.live, ok)
	}
}

// inProgress returns the number of acquires of ok in progress.
func (d *deliveries) inProgress(ok ownerKey) int { return d.live[ok] }

// hold keeps token, granted to ok's wait that had gone, for an acquire in
// progress to return.
func (d *deliveries) hold(ok ownerKey, token uint64) {
	if d.undelivered == nil {
		d.undelivered = make(map[ownerKey]uint64)
	}
	d.undelivered[ok] = token
}

// take removes and returns the grant held for ok, if any.
func (d *deliveries) take(ok ownerKey) (uint64, bool) {
	t, has := d.undelivered[ok]
	delete(d.undelivered, ok)
	return t, has
}

// begin records an acquire of (key, owner) in progress; end must follow.
func (g *grants) begin(ok ownerKey) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.deliveries.started(ok)
}

// end ends one acquire of (key, owner) that returned token (zero: none). A
// grant made meanwhile to the owner's abandoned wait is revoked once no
// acquire of the owner is left that might return it.
//
// c, if not nil, is the client the acquire returned token to: recorded
// beside the grant (clients.go).
func (g *grants) end(ok ownerKey, token uint64, c *ClientInfo) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c != nil {
		g.recordClientLocked(ok.key, token, *c)
	}
	g.deliveries.finished(ok, token)
	if g.mayReturnLocked(ok) {
		return
	}
	if t, has := g.deliveries.take(ok); has {
		g.revokeUndeliveredLocked(ok, t)
	}
}

// noteUndelivered notes a grant whose caller had gone (see
// undeliveredLocked).
func (g *grants) noteUndelivered(ok ownerKey, token uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.undeliveredLocked(ok, token)
}

// abandonedLocked handles a grant made to a waiter that has gone (its wait
// ended or its connection closed while the grant was in flight). If the owner
// has an acquire in progress, that request returns the same grant (the table
// renews a holder's acquire with its token); otherwise the grant is revoked by
// owner and token only, so nothing else is touched.
func (g *grants) abandonedLocked(ok ownerKey, token uint64) {
	if g.mayReturnLocked(ok) {
		g.undeliveredLocked(ok, token)
		return
	}
	g.revokeUndeliveredLocked(ok, token)
}

// undeliveredLocked notes a grant that reached no caller; it is revoked when
// the owner's last request in progress ends without returning it.
func (g *grants) undeliveredLocked(ok ownerKey, token uint64) {
	g.deliveries.hold(ok, token)
}

// revokeUndeliveredLocked revokes a grant that reached no caller, by owner
// and token only, so that nothing else is touched.
func (g *grants) revokeUndeliveredLocked(ok ownerKey, token uint64) {
	if !g.readyLocked() {
		// A new leader restarts the lease; it ends after its TTL.
		return
	}
	l, held := g.table.Get(ok.key)
	if held && l.Kind == fsm.KindShared {
		// The holder with that token, if it is still there.
		holders := l.Shared.Holders
		l, held = fsm.Lease{}, false
		for _, h := range holders {
			if h.Token == token {
				l, held = h.Lease, true
			}
		}
	}
	if !held || l.Owner != ok.owner || l.Token != token {
		return
	}
	g.log.Debug("revoking a grant no caller received", "key", ok.key, "owner", ok.owner, "token", token)
	// Naming the lock's session marks the revoke as the holder's own: a
	// session's keepalive must not report a lock it never knew it held.
	g.propose(fsm.Command{Op: fsm.OpRevoke, Key: ok.key, Owner: ok.owner, Session: l.Session,
		Lease: &fsm.LeaseRef{Token: token}, Waiter: g.headWaiterLocked(ok.key)})
}

// mayReturnLocked reports whether an acquire of ok in progress may return
// a grant of the key to the owner that reached no caller: one that is not
// waiting in the key's queue. A queued waiter is answered only by a hand-off,
// which never returns a grant already made (the table hands a plain key only
// when free, and a shared key only as a new holder with a new token:
// Lease.Admits refuses a waiter whose owner holds it under the same
// session); it waits for the key the grant holds, and keeping the grant for
// it would stall it until its wait ends. (It is there when a wait for
// another mode or session took the place of the one the grant was for.)
func (g *grants) mayReturnLocked(ok ownerKey) bool {
	live := g.deliveries.inProgress(ok)
	if live > 0 && g.waits.queued(ok.key, ok.owner) {
		live--
	}
	return live > 0
}
