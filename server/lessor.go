package server

import (
	"container/heap"
	"time"

	"github.com/fencerlock/fencer/fsm"
)

// lessor times leases on this node's monotonic clock. Every node records a
// deadline when it applies a grant or renewal, but only a ready leader acts on
// them: it proposes an Expire naming the lease it timed, which the table
// ignores if the lease was renewed since. A node that becomes leader restarts
// every lease at its full TTL (restartAll), because it cannot know how much of
// the old leader's time had passed.
//
// It is laid out for millions of leases: a deadline is kept in the table's
// own lease (fsm.Lease.Deadline, node-local, nanoseconds since the lessor's
// epoch on the monotonic clock), so there is no second map, and the heap
// holds small values.
//
// Deadlines and remaining times are on the lease clock (clock), which is the
// monotonic clock itself except in a fault build that makes it run fast or
// slow (FENCER_CLOCK_RATE); next and deadline convert back to real time for
// the timers.
//
// All methods are called with grants.mu held.
type lessor struct {
	epoch    time.Time // carries a monotonic reading
	clock    leaseClock
	table    *fsm.Table
	queue    deadlineHeap
	expiring map[leaseID]fsm.LeaseRef // leases with an Expire in flight
}

// leaseID names one lease of a key: a plain lock's, or one holder's of a
// shared key (each has a token of its own).
type leaseID struct {
	key   string
	token uint64
}

// forever is what remaining answers for a key that has no TTL.
const forever = time.Duration(1<<63 - 1)

func newLessor(table *fsm.Table) *lessor {
	return &lessor{epoch: time.Now(), clock: newLeaseClock(), table: table, expiring: make(map[leaseID]fsm.LeaseRef)}
}

// mono returns the lease clock's reading at t: nanoseconds since the epoch.
func (ls *lessor) mono(t time.Time) int64 { return int64(ls.clock.leaseTime(t.Sub(ls.epoch))) }

// at returns the real time at which the lease clock reads d.
func (ls *lessor) at(d int64) time.Time { return ls.epoch.Add(ls.clock.realTime(time.Duration(d))) }

// set records that key's lease l was granted or renewed at now. A key
// without a TTL is not timed.
func (ls *lessor) set(key string, l fsm.Lease, now time.Time) {
	if l.TTL == 0 {
		return
	}
	ls.keep(key, l.Ref(), ls.mono(now)+int64(l.TTL)*int64(time.Millisecond))
}

// keep records deadline d for key's lease ref: a write that kept the key's
// TTL (and its node-local deadline) but may have given it a new ref.
func (ls *lessor) keep(key string, ref fsm.LeaseRef, d int64) {
	if !ls.table.SetDeadline(key, ref, d) {
		return // no longer the key's lease
	}
	delete(ls.expiring, leaseID{key, ref.Token})
	heap.Push(&ls.queue, deadlineItem{key: key, ref: ref, deadline: d})
	if len(ls.queue) > 2*ls.table.Len()+1024 {
		ls.compact()
	}
}

// current reports whether it is the heap entry of key's current lease and
// deadline.
func (ls *lessor) current(it deadlineItem) bool {
	d, ok := ls.table.Deadline(it.key, it.ref)
	return ok && d == it.deadline
}

// compact drops the heap entries of renewed or freed leases. Only a leader
// pops them as they come due, so a follower would otherwise keep one per
// renewal.
func (ls *lessor) compact() {
	q := ls.queue[:0]
	for _, it := range ls.queue {
		if ls.current(it) {
			q = append(q, it)
		}
	}
	clear(ls.queue[len(q):])
	ls.queue = q
	heap.Init(&ls.queue)
}

// drop forgets key's lease l, freed, and for a whole shared key its
// holders' leases.
func (ls *lessor) drop(key string, l *fsm.Lease) {
	delete(ls.expiring, leaseID{key, l.Token})
	if l.Shared != nil {
		for _, h := range l.Shared.Holders {
			delete(ls.expiring, leaseID{key, h.Token})
		}
	}
}

// remaining returns how long lease l has left on this node's lease clock;
// zero or less means it has run out. A lease not timed yet (which cannot
// happen under grants.mu) counts as run out rather than guessed.
func (ls *lessor) remaining(l fsm.Lease, now time.Time) time.Duration {
	if l.TTL == 0 {
		return forever // a key without a TTL never runs out
	}
	if l.Deadline == 0 {
		return 0
	}
	return time.Duration(l.Deadline - ls.mono(now))
}

// deadline returns when key's lease ref runs out, if it is current and timed.
func (ls *lessor) deadline(key string, ref fsm.LeaseRef) (time.Time, bool) {
	d, ok := ls.table.Deadline(key, ref)
	return ls.at(d), ok && d != 0
}

// restartAll gives every lease in the table its full TTL from now.
func (ls *lessor) restartAll(now time.Time) {
	ls.expiring = make(map[leaseID]fsm.LeaseRef)
	ls.queue = make(deadlineHeap, 0, ls.table.Len())
	m := ls.mono(now)
	ls.table.SetDeadlines(func(key string, l fsm.Lease) int64 {
		if l.TTL == 0 {
			return 0
		}
		d := m + int64(l.TTL)*int64(time.Millisecond)
		ls.queue = append(ls.queue, deadlineItem{key: key, ref: l.Ref(), deadline: d})
		return d
	})
	heap.Init(&ls.queue)
}

// next returns the earliest deadline that may still matter.
func (ls *lessor) next() (time.Time, bool) {
	for len(ls.queue) > 0 {
		it := ls.queue[0]
		if _, busy := ls.expiring[leaseID{it.key, it.ref.Token}]; ls.current(it) && !busy {
			return ls.at(it.deadline), true
		}
		heap.Pop(&ls.queue) // stale: renewed, freed, or already expiring
	}
	return time.Time{}, false
}

// due marks and returns the leases whose deadline is at or before now.
func (ls *lessor) due(now time.Time) []dueLease {
	var out []dueLease
	for {
		d, ok := ls.next()
		if !ok || d.After(now) {
			return out
		}
		it := heap.Pop(&ls.queue).(deadlineItem)
		ls.expiring[leaseID{it.key, it.ref.Token}] = it.ref
		out = append(out, dueLease{key: it.key, ref: it.ref})
	}
}

// retry puts back a lease whose Expire was not committed.
func (ls *lessor) retry(key string, ref fsm.LeaseRef, now time.Time) {
	id := leaseID{key, ref.Token}
	if busy, ok := ls.expiring[id]; !ok || busy != ref {
		return
	}
	d := ls.mono(now)
	if !ls.table.SetDeadline(key, ref, d) {
		return
	}
	delete(ls.expiring, id)
	heap.Push(&ls.queue, deadlineItem{key: key, ref: ref, deadline: d})
}

type dueLease struct {
	key string
	ref fsm.LeaseRef
}

// deadlineItem is a deadline in the heap; it is current while the key's
// lease has the same ref and deadline.
type deadlineItem struct {
	key      string
	ref      fsm.LeaseRef
	deadline int64
}

// deadlineHeap is a min-heap of deadlines. Entries are never removed when a
// lease is renewed or freed; next skips them when they surface.
type deadlineHeap []deadlineItem

func (h deadlineHeap) Len() int           { return len(h) }
func (h deadlineHeap) Less(i, j int) bool { return h[i].deadline < h[j].deadline }
func (h deadlineHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *deadlineHeap) Push(x any)        { *h = append(*h, x.(deadlineItem)) }
func (h *deadlineHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = deadlineItem{}
	*h = old[:len(old)-1]
	return it
}
