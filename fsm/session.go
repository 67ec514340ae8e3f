package fsm

import (
	"fmt"
	"slices"
)

// Session is a lease of its own that locks can be held under: one
// keepalive renews it, and its end releases every lock it holds. Its ID is
// the position of the command that opened it, so IDs are never reused.
type Session struct {
	ID  uint64
	TTL uint64 // milliseconds
	// Version is the position of the command that last opened or renewed
	// the session (started its TTL): what an expiry names.
	Version uint64
	// Deadline is node-local, as Lease.Deadline is: when the server timed
	// the session to run out on its own clock (0: not timed yet). Apply
	// clears it when it renews the session.
	Deadline int64
	// Taken counts the locks freed from under the session by others (a
	// revoke, a Redis write or delete over them), not by its holder's
	// release: a keepalive tells the holder, which then finds which.
	Taken uint64
	// User is the user that opened it (empty without authentication): a
	// user limited to some locks may use only its own sessions.
	User string
	keys map[string]struct{} // the locks held under it
}

// SessionInfo is a copy of a session's replicated state and the number of
// locks it holds.
type SessionInfo struct {
	ID, TTL, Version, Taken uint64
	Deadline                int64
	Locks                   int
	User                    string
}

func (s *Session) info() SessionInfo {
	return SessionInfo{ID: s.ID, TTL: s.TTL, Version: s.Version, Taken: s.Taken, Deadline: s.Deadline, Locks: len(s.keys), User: s.User}
}

// sortedKeys returns the keys of the locks held under s, in increasing
// order.
func (s *Session) sortedKeys() []string {
	keys := make([]string, 0, len(s.keys))
	for k := range s.keys {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// applySession applies a session command.
func (t *Table) applySession(r *Result, pos uint64, c *Command) {
	if c.Op == OpSessionOpen {
		t.sessions[pos] = &Session{ID: pos, TTL: c.TTL, Version: pos, User: c.Owner, keys: make(map[string]struct{})}
		r.Code = Opened
		return
	}
	s := t.sessions[c.Session]
	switch {
	case c.Op == OpSessionExpire && (s == nil || s.Version != c.Lease.Version):
		r.Code = Stale
	case s == nil:
		r.Code = NoSession
	case c.Op == OpSessionRenew:
		s.Version, s.Deadline = pos, 0
		r.Code, r.Taken = Extended, s.Taken
	case c.Op == OpSessionClose:
		t.endSession(r, pos, c, s, OpRelease, Released)
		r.Code = Closed
	case c.Op == OpSessionExpire:
		t.endSession(r, pos, c, s, OpExpire, Expired)
		r.Code = Expired
	default: // OpSessionRevoke
		t.endSession(r, pos, c, s, OpRevoke, Revoked)
		r.Code = Revoked
	}
}

// endSession ends s: each lock it holds, in key order, is freed as a
// command op of its own would free it (a close remembers the releases, as
// OpRelease does; an expiry or revoke does not) and handed to its waiter
// in c.Waiters, if any. r.Sub gets one result for each lock.
//
// Each hand-off is a grant of its own, to its own waiter, so each gets a
// position, and a token, of its own: the first pos, the next pos+1, and so
// on, as the commands of a batch do; the command then takes up those
// positions (t.extra), and the floor grows by the extra ones after it.
func (t *Table) endSession(r *Result, pos uint64, c *Command, s *Session, op Op, code Code) {
	keys := s.sortedKeys()
	// The session is gone before any hand-off, so that none goes to a
	// waiter under it.
	delete(t.sessions, s.ID)
	waiters := c.Waiters
	used := uint64(0) // positions the hand-offs took
	r.Sub = make([]*Result, 0, len(keys))
	for _, k := range keys {
		l := t.locks[k]
		// The leases to free: the lock, or the session's holders of a
		// shared key, each with a result of its own.
		var freed []*Lease
		var holders []*Holder
		switch {
		case l != nil && l.Kind == KindShared:
			for _, h := range l.Shared.Holders {
				if h.Session == s.ID {
					holders = append(holders, h)
				}
			}
		case l != nil && l.Session == s.ID:
			freed = append(freed, l)
		}
		if len(freed)+len(holders) == 0 {
			panic(fmt.Sprintf("fsm: session %d lists key %q, which it does not hold", s.ID, k))
		}
		for _, h := range holders {
			freed = append(freed, t.freeHolder(k, l, h, false))
		}
		if l.Kind != KindShared {
			delete(t.locks, k)
		}
		for len(waiters) > 0 && waiters[0].Key < k {
			waiters = waiters[1:]
		}
		var w *Waiter
		if len(waiters) > 0 && waiters[0].Key == k {
			wc := waiters[0].Waiter
			w = &wc
		}
		for i, f := range freed {
			cmd := &Command{Op: op, Key: k, Owner: f.Owner, Session: s.ID}
			sub := &Result{Cmd: cmd, Code: code, Freed: f}
			if i < len(holders) {
				sub.Holder = holders[i]
			}
			if op == OpRelease && l.Kind != KindShared {
				t.remember(k, f.Owner, f.Token, pos)
			}
			if i == len(freed)-1 && w != nil {
				cmd.Waiter = w
				if sub.Waiter = t.handOff(k, w, pos+used); sub.Waiter == WaiterGranted {
					used++
					if nl := t.locks[k]; w.Mode != ModeNone && nl != nil {
						if h := nl.Shared.byOwner(w.Owner, w.Session); h != nil {
							hc := *h // a copy, as setResultLease makes
							sub.Holder = &hc
						}
					}
				}
			}
			sub.Position = pos + max(used, 1) - 1
			if nl := t.locks[k]; nl != nil {
				sub.Lease = *nl
				sub.Lease.Shared = nil
			}
			r.Sub = append(r.Sub, sub)
		}
	}
	t.extra = max(used, 1) - 1
}

// Session returns the session id, if it is open.
func (t *Table) Session(id uint64) (SessionInfo, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	s, ok := t.sessions[id]
	if !ok {
		return SessionInfo{}, false
	}
	return s.info(), true
}

// SessionKeys returns the keys of the locks held under session id, in
// increasing order, and whether the session is open.
func (t *Table) SessionKeys(id uint64) ([]string, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	s, ok := t.sessions[id]
	if !ok {
		return nil, false
	}
	return s.sortedKeys(), true
}

// SetSessionDeadline records the node-local deadline of session id if it
// is still at version; it reports whether it was.
func (t *Table) SetSessionDeadline(id, version uint64, deadline int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.sessions[id]
	if !ok || s.Version != version {
		return false
	}
	s.Deadline = deadline
	return true
}

// SetSessionDeadlines sets every session's node-local deadline to what fn
// returns for it, while holding the table's lock: fn must not call back
// into the table.
func (t *Table) SetSessionDeadlines(fn func(s SessionInfo) int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.sessions {
		s.Deadline = fn(s.info())
	}
}

// Sessions returns the number of open sessions.
func (t *Table) Sessions() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.sessions)
}
