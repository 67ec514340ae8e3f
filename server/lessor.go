package server

import (
	"time"

	"github.com/fencerlock/fencer/fsm"
)

// lessor times leases, of locks and of sessions, on this node's lease
// clock, and answers whether one ran out (ranOut). Every node records a
// deadline when it applies a grant, renewal, session open or keepalive, but
// only a ready leader acts on them: it proposes an Expire (a SessionExpire)
// naming the lease (the session's version) it timed, which the table
// ignores if the lease was renewed since. A node that becomes leader
// restarts every lease at its full TTL (restartAll), because it cannot know
// how much of the old leader's time had passed.
//
// It is laid out for millions of leases: a deadline is kept in the table's
// own record (fsm.Lease.Deadline, fsm.SessionInfo.Deadline, node-local,
// nanoseconds since the lessor's epoch on the lease clock), so there is no
// second map, and its deadline queues (deadlines.go) hold small values.
//
// Deadlines and times left are on the lease clock (clock), which is the
// monotonic clock itself except in a fault build that makes it run fast or
// slow (FENCER_CLOCK_RATE); next and deadline convert back to real time for
// the timers.
//
// It has no lock: its owner, grants, calls it with grants.mu held, the
// lock under which the applier changes the table.
type lessor struct {
	epoch    time.Time // carries a monotonic reading
	clock    leaseClock
	table    *fsm.Table
	locks    deadlineQueue[leaseID, fsm.LeaseRef]
	sessions deadlineQueue[uint64, uint64] // by session ID, of its version
}

// leaseID names one lease of a key: a plain lock's, or one holder's of a
// shared key (each has a token of its own).
type leaseID struct {
	key   string
	token uint64
}

// forever is what left answers for a key that has no TTL.
const forever = time.Duration(1<<63 - 1)

func newLessor(table *fsm.Table) *lessor {
	ls := &lessor{epoch: time.Now(), clock: newLeaseClock(), table: table}
	ls.locks = newDeadlineQueue(func(id leaseID, ref fsm.LeaseRef, d int64) bool {
		cur, ok := table.Deadline(id.key, ref)
		return ok && cur == d
	})
	ls.sessions = newDeadlineQueue(func(id, version uint64, d int64) bool {
		s, ok := table.Session(id)
		return ok && s.Version == version && s.Deadline == d
	})
	return ls
}

// mono returns the lease clock's reading at t: nanoseconds since the epoch.
func (ls *lessor) mono(t time.Time) int64 { return int64(ls.clock.leaseTime(t.Sub(ls.epoch))) }

// at returns the real time at which the lease clock reads d.
func (ls *lessor) at(d int64) time.Time { return ls.epoch.Add(ls.clock.realTime(time.Duration(d))) }

// timed is what the lease clock knows of a lease, a lock's or a session's:
// its TTL in milliseconds (zero: it never runs out) and its node-local
// deadline (zero: not timed yet).
type timed struct {
	ttl      uint64
	deadline int64
}

// lockTimes is lock (or shared key holder) l's lease as the clock sees it.
func lockTimes(l fsm.Lease) timed { return timed{ttl: l.TTL, deadline: l.Deadline} }

// sessionTimes is session s's lease as the clock sees it.
func sessionTimes(s fsm.SessionInfo) timed { return timed{ttl: s.TTL, deadline: s.Deadline} }

// left returns how long lease t has left at now on this node's lease
// clock; zero or less means it ran out. A lease not timed yet (which
// cannot happen under grants.mu) counts as run out rather than guessed.
func (ls *lessor) left(t timed, now time.Time) time.Duration {
	if t.ttl == 0 {
		return forever // a key without a TTL never runs out
	}
	if t.deadline == 0 {
		return 0
	}
	return time.Duration(t.deadline - ls.mono(now))
}

// ranOut reports whether lease t has run out at now on this node's lease
// clock: the one answer to that question, for locks, shared keys' holders
// and sessions alike. On a leader a lease that ran out reads as free
// before its expiry commits (docs/safety.md).
func (ls *lessor) ranOut(t timed, now time.Time) bool { return ls.left(t, now) <= 0 }

// expiresAt is the deadline of a lease of ttl milliseconds granted or
// renewed when the lease clock read m: every deadline is computed here.
func expiresAt(m int64, ttl uint64) int64 { return m + int64(ttl)*int64(time.Millisecond) }

// set records that key's lease l was granted or renewed at now. A key
// without a TTL is not timed.
func (ls *lessor) set(key string, l fsm.Lease, now time.Time) {
	if l.TTL == 0 {
		return
	}
	ls.keep(key, l.Ref(), expiresAt(ls.mono(now), l.TTL))
}

// keep records deadline d for key's lease ref: a write that kept the key's
// TTL (and its node-local deadline) but may have given it a new ref.
func (ls *lessor) keep(key string, ref fsm.LeaseRef, d int64) {
	if !ls.table.SetDeadline(key, ref, d) {
		return // no longer the key's lease
	}
	ls.locks.push(leaseID{key, ref.Token}, ref, d, ls.table.Len())
}

// drop forgets key's lease l, freed, and for a whole shared key its
// holders' leases.
func (ls *lessor) drop(key string, l *fsm.Lease) {
	ls.locks.forget(leaseID{key, l.Token})
	if l.Shared != nil {
		for _, h := range l.Shared.Holders {
			ls.locks.forget(leaseID{key, h.Token})
		}
	}
}

// setSession records that session id was opened or renewed at version, at
// now.
func (ls *lessor) setSession(id, version, ttl uint64, now time.Time) {
	d := expiresAt(ls.mono(now), ttl)
	if !ls.table.SetSessionDeadline(id, version, d) {
		return
	}
	ls.sessions.push(id, version, d, ls.table.Sessions())
}

// sessionEnded forgets session id's expiry in flight.
func (ls *lessor) sessionEnded(id uint64) { ls.sessions.forget(id) }

// deadline returns when key's lease ref runs out, if it is current and timed.
func (ls *lessor) deadline(key string, ref fsm.LeaseRef) (time.Time, bool) {
	d, ok := ls.table.Deadline(key, ref)
	return ls.at(d), ok && d != 0
}

// restartAll gives every lease and every open session in the table its
// full TTL from now.
func (ls *lessor) restartAll(now time.Time) {
	m := ls.mono(now)
	ls.locks.restart(ls.table.Len())
	ls.table.SetDeadlines(func(key string, l fsm.Lease) int64 {
		if l.TTL == 0 {
			return 0
		}
		d := expiresAt(m, l.TTL)
		ls.locks.add(leaseID{key, l.Token}, l.Ref(), d)
		return d
	})
	ls.locks.restarted()
	ls.sessions.restart(ls.table.Sessions())
	ls.table.SetSessionDeadlines(func(s fsm.SessionInfo) int64 {
		d := expiresAt(m, s.TTL)
		ls.sessions.add(s.ID, s.Version, d)
		return d
	})
	ls.sessions.restarted()
}

// next returns the earliest deadline, of a lock or a session, that may
// still matter.
func (ls *lessor) next() (time.Time, bool) {
	l, okL := ls.locks.peek()
	s, okS := ls.sessions.peek()
	switch {
	case okL && (!okS || l.deadline <= s.deadline):
		return ls.at(l.deadline), true
	case okS:
		return ls.at(s.deadline), true
	}
	return time.Time{}, false
}

// nextSession returns the earliest session deadline that may still matter.
func (ls *lessor) nextSession() (time.Time, bool) {
	s, ok := ls.sessions.peek()
	return ls.at(s.deadline), ok
}

// dueLease is a lock's lease whose deadline passed.
type dueLease struct {
	key string
	ref fsm.LeaseRef
}

// dueSession is a session whose deadline passed, at its version.
type dueSession struct {
	id, version uint64
}

// due marks and returns the leases and sessions whose deadline is at or
// before now.
func (ls *lessor) due(now time.Time) ([]dueLease, []dueSession) {
	var locks []dueLease
	for {
		it, ok := ls.locks.peek()
		if !ok || ls.at(it.deadline).After(now) {
			break
		}
		ls.locks.take()
		locks = append(locks, dueLease{key: it.id.key, ref: it.ref})
	}
	var sessions []dueSession
	for {
		it, ok := ls.sessions.peek()
		if !ok || ls.at(it.deadline).After(now) {
			break
		}
		ls.sessions.take()
		sessions = append(sessions, dueSession{id: it.id, version: it.ref})
	}
	return locks, sessions
}

// retry puts back a lease whose Expire was not committed, due at now.
func (ls *lessor) retry(key string, ref fsm.LeaseRef, now time.Time) {
	id := leaseID{key, ref.Token}
	if !ls.locks.retrying(id, ref) {
		return
	}
	d := ls.mono(now)
	if ls.table.SetDeadline(key, ref, d) {
		ls.locks.push(id, ref, d, ls.table.Len())
	}
}

// retrySession puts back a session whose expiry was not committed, due at
// now.
func (ls *lessor) retrySession(id, version uint64, now time.Time) {
	if !ls.sessions.retrying(id, version) {
		return
	}
	d := ls.mono(now)
	if ls.table.SetSessionDeadline(id, version, d) {
		ls.sessions.push(id, version, d, ls.table.Sessions())
	}
}
