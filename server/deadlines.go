package server

import "container/heap"

// deadlineQueue is a min-heap of deadlines on the lease clock (lessor.mono),
// one type for both things the lessor times: locks' leases (ID leaseID,
// Ref fsm.LeaseRef) and sessions (ID the session's, Ref its version). A
// deadline itself lives in the table's record (fsm.Lease.Deadline,
// fsm.SessionInfo.Deadline); the queue holds small copies, each current
// while the record still has the same ref and deadline (current). Entries
// are never removed when a lease is renewed or freed: peek drops the stale
// ones as they surface, and push compacts the heap when it outgrows what
// is live.
//
// A deadline taken as due is marked expiring until its expiry commits
// (forget), fails to (retrying), or the lease gets a new deadline (push);
// peek skips it meanwhile, so one expiry is in flight per lease.
//
// It has no lock: its owner (lessor, under grants.mu) calls it.
type deadlineQueue[ID, Ref comparable] struct {
	items    deadlineHeap[ID, Ref]
	expiring map[ID]Ref // taken as due, expiry in flight
	// current reports whether deadline d is still the one recorded for
	// id's ref.
	current func(id ID, ref Ref, d int64) bool
}

// deadlineItem is one deadline in the queue.
type deadlineItem[ID, Ref comparable] struct {
	id       ID
	ref      Ref
	deadline int64
}

func newDeadlineQueue[ID, Ref comparable](current func(ID, Ref, int64) bool) deadlineQueue[ID, Ref] {
	return deadlineQueue[ID, Ref]{expiring: make(map[ID]Ref), current: current}
}

// push queues deadline d of id's ref, which the caller has just recorded,
// ending any expiry in flight of id. live is how many things are timed:
// past twice that the stale entries are dropped (only a leader pops them
// as they come due, so a follower would otherwise keep one per renewal).
func (q *deadlineQueue[ID, Ref]) push(id ID, ref Ref, d int64, live int) {
	delete(q.expiring, id)
	heap.Push(&q.items, deadlineItem[ID, Ref]{id: id, ref: ref, deadline: d})
	if len(q.items) > 2*live+1024 {
		q.compact()
	}
}

// compact drops the entries of renewed or freed leases.
func (q *deadlineQueue[ID, Ref]) compact() {
	kept := q.items[:0]
	for _, it := range q.items {
		if q.current(it.id, it.ref, it.deadline) {
			kept = append(kept, it)
		}
	}
	clear(q.items[len(kept):])
	q.items = kept
	heap.Init(&q.items)
}

// restart empties the queue and its expiries in flight, for a new set of
// deadlines that add gives it, then heap-orders them (restarted).
func (q *deadlineQueue[ID, Ref]) restart(capacity int) {
	q.expiring = make(map[ID]Ref)
	q.items = make(deadlineHeap[ID, Ref], 0, capacity)
}

// add appends a deadline between restart and restarted.
func (q *deadlineQueue[ID, Ref]) add(id ID, ref Ref, d int64) {
	q.items = append(q.items, deadlineItem[ID, Ref]{id: id, ref: ref, deadline: d})
}

// restarted orders what add appended.
func (q *deadlineQueue[ID, Ref]) restarted() { heap.Init(&q.items) }

// peek returns the earliest deadline that may still matter: current, and
// not already taken as due.
func (q *deadlineQueue[ID, Ref]) peek() (deadlineItem[ID, Ref], bool) {
	for len(q.items) > 0 {
		it := q.items[0]
		if _, busy := q.expiring[it.id]; q.current(it.id, it.ref, it.deadline) && !busy {
			return it, true
		}
		heap.Pop(&q.items) // stale: renewed, freed, or already expiring
	}
	return deadlineItem[ID, Ref]{}, false
}

// take removes the deadline peek returned and marks it expiring.
func (q *deadlineQueue[ID, Ref]) take() deadlineItem[ID, Ref] {
	it := heap.Pop(&q.items).(deadlineItem[ID, Ref])
	q.expiring[it.id] = it.ref
	return it
}

// forget ends id's expiry in flight (it committed, or the lease was freed).
func (q *deadlineQueue[ID, Ref]) forget(id ID) { delete(q.expiring, id) }

// retrying reports whether id's ref has an expiry in flight, which failed
// to commit: the caller then records a new deadline and pushes it.
func (q *deadlineQueue[ID, Ref]) retrying(id ID, ref Ref) bool {
	busy, ok := q.expiring[id]
	return ok && busy == ref
}

// deadlineHeap is a min-heap of deadlines (container/heap).
type deadlineHeap[ID, Ref comparable] []deadlineItem[ID, Ref]

func (h deadlineHeap[ID, Ref]) Len() int           { return len(h) }
func (h deadlineHeap[ID, Ref]) Less(i, j int) bool { return h[i].deadline < h[j].deadline }
func (h deadlineHeap[ID, Ref]) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *deadlineHeap[ID, Ref]) Push(x any)        { *h = append(*h, x.(deadlineItem[ID, Ref])) }
func (h *deadlineHeap[ID, Ref]) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = deadlineItem[ID, Ref]{}
	*h = old[:len(old)-1]
	return it
}
