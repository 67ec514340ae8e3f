package server

import (
	"context"
	"fmt"
	"time"

	"github.com/fencerlock/fencer/fsm"
	"github.com/prometheus/client_golang/prometheus"
)

// Listings for operators: pages of the lock table and of the sessions,
// each read at one position of the log and answered by the leader, whose
// wait queues and lease clock they show.

// MaxListCount bounds one page of a listing.
const MaxListCount = 1000

// LockQuery selects a page of locks.
type LockQuery struct {
	// Prefix keeps names that start with it; After, the cursor, names
	// that sort after it ("" from the start).
	Prefix, After string
	// Count is the page's size: 1 to MaxListCount.
	Count int
	// Visible, if set, keeps only the names it allows (a user's pattern).
	Visible func(name string) bool
	// Elections keeps only elections: plain locks held under a session.
	Elections bool
}

// LockPage is one page of the lock table.
type LockPage struct {
	// Position is the log position the page was read at.
	Position uint64
	// Next is the cursor of the next page ("" after the last): a listing
	// of several pages is not one snapshot of the table.
	Next  string
	Locks []LockInfo
}

// LockInfo is one key of the table.
type LockInfo struct {
	Name string
	// Kind is "lock" (a plain lock, or a Redis string), "read-write",
	// "semaphore", or "redis-hash", "redis-zset", "redis-list", "redis-set".
	Kind    string
	Permits uint64 // a semaphore's
	// Holders are its grants whose lease has time left, in token order.
	Holders []Holding
	// Waiters are the acquires queued for it on the leader now, in order.
	Waiters []WaiterInfo
	// Value is the value of a lock held under a session (an election's
	// announcement).
	Value string
}

// WaiterInfo is one queued acquire.
type WaiterInfo struct {
	Owner   string
	Mode    fsm.Mode
	Permits uint64
	Session uint64
	// Keys is how many locks it waits for at once (1 but for a multi-key
	// acquire).
	Keys int
	// Waited is how long it has been in line, from its first round.
	Waited time.Duration
}

// Locks returns a page of the lock table, read on the leader.
func (n *Node) Locks(ctx context.Context, q LockQuery) (LockPage, error) {
	if q.Count < 1 || q.Count > MaxListCount {
		return LockPage{}, invalid("count", "must be 1 to %d, got %d", MaxListCount, q.Count)
	}
	if err := n.verifyLeader(ctx); err != nil {
		return LockPage{}, err
	}
	return n.grants.page(q), nil
}

func (g *grants) page(q LockQuery) LockPage {
	g.mu.Lock() // no entry is applied, no waiter queued, meanwhile
	defer g.mu.Unlock()
	keep := func(k string, l *fsm.Lease) bool {
		return (q.Visible == nil || q.Visible(k)) && (!q.Elections || l.Kind == fsm.KindString && l.Session != 0)
	}
	keys, leases, pos, more := g.table.Page(q.Prefix, q.After, q.Count, keep)
	now := time.Now()
	p := LockPage{Position: pos, Locks: make([]LockInfo, len(keys))}
	for i, k := range keys {
		p.Locks[i] = g.lockInfoLocked(k, leases[i], now)
	}
	if more {
		p.Next = keys[len(keys)-1]
	}
	return p
}

// lockInfoLocked describes key, whose lease is l, at now.
func (g *grants) lockInfoLocked(key string, l fsm.Lease, now time.Time) LockInfo {
	li := LockInfo{Name: key, Kind: kindName(l)}
	one := func(l fsm.Lease, mode fsm.Mode, slot uint64) {
		if rem := g.lockLeftLocked(l, now); rem > 0 {
			li.Holders = append(li.Holders, Holding{Owner: l.Owner, Token: l.Token, Remaining: rem, Session: l.Session, Mode: mode, Slot: int(slot),
				Client: g.clientLocked(key, l.Token)})
		}
	}
	if l.Shared != nil {
		li.Permits = l.Shared.Permits
		for _, h := range l.Shared.Holders {
			one(h.Lease, h.Mode, h.Slot)
		}
	} else if l.Kind == fsm.KindString || l.Kind == fsm.KindHash {
		one(l, fsm.ModeNone, 0)
		if l.Session != 0 {
			li.Value = l.Data
		}
	}
	for _, w := range g.waits.byKey[key] {
		li.Waiters = append(li.Waiters, WaiterInfo{Owner: w.owner, Mode: w.mode, Permits: w.permits, Session: w.session,
			Keys: max(len(w.keys), 1), Waited: now.Sub(w.since)})
	}
	return li
}

// kindName names what kind of lock or value l is.
func kindName(l fsm.Lease) string {
	switch {
	case l.Shared != nil && l.Shared.Permits > 0:
		return "semaphore"
	case l.Shared != nil:
		return "read-write"
	}
	switch l.Kind {
	case fsm.KindString:
		return "lock"
	case fsm.KindHash:
		return "redis-hash"
	case fsm.KindZSet:
		return "redis-zset"
	case fsm.KindList:
		return "redis-list"
	case fsm.KindSet:
		return "redis-set"
	}
	return fmt.Sprintf("kind-%d", l.Kind)
}

// SessionPage is one page of the open sessions.
type SessionPage struct {
	Position uint64 // the log position it was read at
	Next     uint64 // the cursor of the next page (0 after the last)
	Sessions []SessionListing
}

// SessionListing is one open session.
type SessionListing struct {
	ID   uint64
	User string // the user that opened it ("" without authentication)
	TTL  time.Duration
	// Remaining is how long it has left on the leader's clock.
	Remaining time.Duration
	// Locks is how many locks it holds; Names the first MaxSessionNames
	// of them, sorted.
	Locks int
	Names []string
	// Taken counts the locks taken from it by others (a revoke, a Redis
	// write over them).
	Taken uint64
}

// MaxSessionNames bounds the lock names listed per session.
const MaxSessionNames = 16

// Sessions returns a page of the open sessions with an ID above after, read
// on the leader; with user not empty, only that user's.
func (n *Node) Sessions(ctx context.Context, after uint64, count int, user string) (SessionPage, error) {
	if count < 1 || count > MaxListCount {
		return SessionPage{}, invalid("count", "must be 1 to %d, got %d", MaxListCount, count)
	}
	if err := n.verifyLeader(ctx); err != nil {
		return SessionPage{}, err
	}
	var keep func(fsm.SessionInfo) bool
	if user != "" {
		keep = func(s fsm.SessionInfo) bool { return s.User == user }
	}
	return n.grants.sessionPage(after, count, keep), nil
}

func (g *grants) sessionPage(after uint64, count int, keep func(fsm.SessionInfo) bool) SessionPage {
	g.mu.Lock() // no entry is applied meanwhile
	defer g.mu.Unlock()
	ss, names, pos, more := g.table.SessionPage(after, count, MaxSessionNames, keep)
	now := time.Now()
	p := SessionPage{Position: pos, Sessions: make([]SessionListing, len(ss))}
	for i, s := range ss {
		p.Sessions[i] = SessionListing{ID: s.ID, User: s.User, TTL: time.Duration(s.TTL) * time.Millisecond,
			Remaining: g.left(sessionTimes(s), now), Locks: s.Locks, Names: names[i], Taken: s.Taken}
	}
	if more {
		p.Next = ss[len(ss)-1].ID
	}
	return p
}

// newExpiryBacklog exports how many expiries the leader proposed that are
// not applied yet: one that stays high means expiries cannot commit.
func newExpiryBacklog(n *Node) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fencer_expiry_backlog",
		Help: "On the leader: leases and sessions whose expiry was proposed and is not applied yet. One that stays high means expiries cannot commit (no quorum, a slow disk) and run-out leases stay in the table.",
	}, func() float64 { return float64(n.grants.expiryBacklog()) })
}

// expiryBacklog counts the leases and sessions whose expiry is in flight.
func (g *grants) expiryBacklog() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.lessor.locks.expiring) + len(g.lessor.sessions.expiring)
}
