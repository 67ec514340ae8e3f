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
// All methods are called with Node.mu held.
type lessor struct {
	leases map[string]*timedLease
	queue  deadlineHeap
}

// timedLease is the deadline of the current lease of a key.
type timedLease struct {
	ref      fsm.LeaseRef
	deadline time.Time
	expiring bool // an Expire for it is in flight
}

func newLessor() *lessor {
	return &lessor{leases: make(map[string]*timedLease)}
}

// set records that key's lease l was granted or renewed at now.
func (ls *lessor) set(key string, l fsm.Lease, now time.Time) {
	d := now.Add(time.Duration(l.TTL) * time.Millisecond)
	ls.leases[key] = &timedLease{ref: l.Ref(), deadline: d}
	heap.Push(&ls.queue, deadlineItem{key: key, ref: l.Ref(), deadline: d})
	if len(ls.queue) > 2*len(ls.leases)+1024 {
		ls.compact()
	}
}

// compact drops the heap entries of renewed or freed leases. Only a leader
// pops them as they come due, so a follower would otherwise keep one per
// renewal.
func (ls *lessor) compact() {
	q := ls.queue[:0]
	for _, it := range ls.queue {
		if tl, ok := ls.leases[it.key]; ok && tl.ref == it.ref && tl.deadline.Equal(it.deadline) {
			q = append(q, it)
		}
	}
	clear(ls.queue[len(q):])
	ls.queue = q
	heap.Init(&ls.queue)
}

// drop forgets key's lease if it is the one with token.
func (ls *lessor) drop(key string, token uint64) {
	if tl, ok := ls.leases[key]; ok && tl.ref.Token == token {
		delete(ls.leases, key)
	}
}

// remaining returns how long key's lease with ref has left on this node's
// clock; zero or less means it has run out.
func (ls *lessor) remaining(key string, ref fsm.LeaseRef, now time.Time) time.Duration {
	tl, ok := ls.leases[key]
	if !ok || tl.ref != ref {
		// Applied but not yet seen by the lessor cannot happen under
		// Node.mu; treat a mismatch as run out rather than guess.
		return 0
	}
	return tl.deadline.Sub(now)
}

// restartAll gives every lease in the table its full TTL from now.
func (ls *lessor) restartAll(table *fsm.Table, now time.Time) {
	ls.leases = make(map[string]*timedLease, table.Len())
	ls.queue = ls.queue[:0]
	table.Range(func(key string, l fsm.Lease) {
		d := now.Add(time.Duration(l.TTL) * time.Millisecond)
		ls.leases[key] = &timedLease{ref: l.Ref(), deadline: d}
		ls.queue = append(ls.queue, deadlineItem{key: key, ref: l.Ref(), deadline: d})
	})
	heap.Init(&ls.queue)
}

// next returns the earliest deadline that may still matter.
func (ls *lessor) next() (time.Time, bool) {
	for len(ls.queue) > 0 {
		it := ls.queue[0]
		if tl, ok := ls.leases[it.key]; ok && tl.ref == it.ref && tl.deadline.Equal(it.deadline) && !tl.expiring {
			return it.deadline, true
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
		ls.leases[it.key].expiring = true
		out = append(out, dueLease{key: it.key, ref: it.ref})
	}
}

// retry puts back a lease whose Expire was not committed.
func (ls *lessor) retry(key string, ref fsm.LeaseRef, now time.Time) {
	tl, ok := ls.leases[key]
	if !ok || tl.ref != ref || !tl.expiring {
		return
	}
	tl.expiring = false
	tl.deadline = now
	heap.Push(&ls.queue, deadlineItem{key: key, ref: ref, deadline: now})
}

type dueLease struct {
	key string
	ref fsm.LeaseRef
}

type deadlineItem struct {
	key      string
	ref      fsm.LeaseRef
	deadline time.Time
}

// deadlineHeap is a min-heap of deadlines. Entries are never removed when a
// lease is renewed or freed; next skips them when they surface.
type deadlineHeap []deadlineItem

func (h deadlineHeap) Len() int           { return len(h) }
func (h deadlineHeap) Less(i, j int) bool { return h[i].deadline.Before(h[j].deadline) }
func (h deadlineHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *deadlineHeap) Push(x any)        { *h = append(*h, x.(deadlineItem)) }
func (h *deadlineHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = deadlineItem{}
	*h = old[:len(old)-1]
	return it
}
