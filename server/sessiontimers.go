package server

import (
	"container/heap"
	"time"

	"github.com/fencerlock/fencer/fsm"
)

// sessionTimers times sessions as the lessor times leases, on the same lease
// clock: every node records a deadline when it applies an open or renewal,
// only a ready leader acts on them (it proposes an expiry naming the
// session's version, which the table ignores if the session was renewed
// since), and a new leader restarts every session at its full TTL. A
// deadline is kept in the table's own session record (node-local).
//
// All methods are called with grants.mu held.
type sessionTimers struct {
	ls       *lessor // its clock and table
	queue    sessionHeap
	expiring map[uint64]uint64 // session → version with an expiry in flight
}

func newSessionTimers(ls *lessor) *sessionTimers {
	return &sessionTimers{ls: ls, expiring: make(map[uint64]uint64)}
}

// set records that session id was opened or renewed at version, at now.
func (st *sessionTimers) set(id, version, ttl uint64, now time.Time) {
	d := st.ls.mono(now) + int64(ttl)*int64(time.Millisecond)
	if !st.ls.table.SetSessionDeadline(id, version, d) {
		return
	}
	delete(st.expiring, id)
	heap.Push(&st.queue, sessionItem{id: id, version: version, deadline: d})
	if len(st.queue) > 2*st.ls.table.Sessions()+1024 {
		q := st.queue[:0]
		for _, it := range st.queue {
			if st.current(it) {
				q = append(q, it)
			}
		}
		clear(st.queue[len(q):])
		st.queue = q
		heap.Init(&st.queue)
	}
}

// ended forgets session id's expiry in flight.
func (st *sessionTimers) ended(id uint64) { delete(st.expiring, id) }

func (st *sessionTimers) current(it sessionItem) bool {
	s, ok := st.ls.table.Session(it.id)
	return ok && s.Version == it.version && s.Deadline == it.deadline
}

// remaining returns how long session s has left on this node's lease
// clock; an untimed session counts as run out.
func (st *sessionTimers) remaining(s fsm.SessionInfo, now time.Time) time.Duration {
	if s.Deadline == 0 {
		return 0
	}
	return time.Duration(s.Deadline - st.ls.mono(now))
}

// restartAll gives every open session its full TTL from now.
func (st *sessionTimers) restartAll(now time.Time) {
	st.expiring = make(map[uint64]uint64)
	st.queue = st.queue[:0]
	m := st.ls.mono(now)
	st.ls.table.SetSessionDeadlines(func(s fsm.SessionInfo) int64 {
		d := m + int64(s.TTL)*int64(time.Millisecond)
		st.queue = append(st.queue, sessionItem{id: s.ID, version: s.Version, deadline: d})
		return d
	})
	heap.Init(&st.queue)
}

// next returns the earliest deadline that may still matter.
func (st *sessionTimers) next() (time.Time, bool) {
	for len(st.queue) > 0 {
		it := st.queue[0]
		if _, busy := st.expiring[it.id]; st.current(it) && !busy {
			return st.ls.at(it.deadline), true
		}
		heap.Pop(&st.queue)
	}
	return time.Time{}, false
}

// due marks and returns the sessions whose deadline is at or before now.
func (st *sessionTimers) due(now time.Time) []sessionItem {
	var out []sessionItem
	for {
		d, ok := st.next()
		if !ok || d.After(now) {
			return out
		}
		it := heap.Pop(&st.queue).(sessionItem)
		st.expiring[it.id] = it.version
		out = append(out, it)
	}
}

// retry puts back a session whose expiry was not committed.
func (st *sessionTimers) retry(id, version uint64, now time.Time) {
	if v, ok := st.expiring[id]; !ok || v != version {
		return
	}
	d := st.ls.mono(now)
	if !st.ls.table.SetSessionDeadline(id, version, d) {
		return
	}
	delete(st.expiring, id)
	heap.Push(&st.queue, sessionItem{id: id, version: version, deadline: d})
}

type sessionItem struct {
	id, version uint64
	deadline    int64
}

type sessionHeap []sessionItem

func (h sessionHeap) Len() int           { return len(h) }
func (h sessionHeap) Less(i, j int) bool { return h[i].deadline < h[j].deadline }
func (h sessionHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *sessionHeap) Push(x any)        { *h = append(*h, x.(sessionItem)) }
func (h *sessionHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}
