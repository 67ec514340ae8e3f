package fsm

import (
	"cmp"
	"container/heap"
	"slices"
	"strings"
)

// Page returns, in increasing order, up to count keys that start with
// prefix, sort after after and that keep accepts (nil: every one), each
// with a copy of its lease; the table's position they were read at; and
// whether more such keys follow. It reads the whole table under its read
// lock once, keeping only the count+1 smallest names, so that a page costs
// one pass and no sort of the table; keep must not call back into the
// table.
func (t *Table) Page(prefix, after string, count int, keep func(key string, l *Lease) bool) (keys []string, leases []Lease, position uint64, more bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	s := newSmallest[string](count)
	for k, l := range t.locks {
		if strings.HasPrefix(k, prefix) && k > after && s.wants(k) && (keep == nil || keep(k, l)) {
			s.add(k)
		}
	}
	keys, more = s.sorted()
	leases = make([]Lease, len(keys))
	for i, k := range keys {
		leases[i] = t.locks[k].copy()
	}
	return keys, leases, t.floor + t.lastIndex, more
}

// SessionPage returns, by increasing ID, up to count open sessions with an
// ID above after that keep accepts (nil: every one), with the names of the
// locks each holds (sorted, at most maxKeys of them); the table's position
// they were read at; and whether more follow.
func (t *Table) SessionPage(after uint64, count, maxKeys int, keep func(s SessionInfo) bool) (sessions []SessionInfo, keys [][]string, position uint64, more bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	s := newSmallest[uint64](count)
	for id, se := range t.sessions {
		if id > after && s.wants(id) && (keep == nil || keep(se.info())) {
			s.add(id)
		}
	}
	ids, more := s.sorted()
	sessions, keys = make([]SessionInfo, len(ids)), make([][]string, len(ids))
	for i, id := range ids {
		se := t.sessions[id]
		sessions[i] = se.info()
		ks := se.sortedKeys()
		keys[i] = ks[:min(len(ks), maxKeys)]
	}
	return sessions, keys, t.floor + t.lastIndex, more
}

// smallest keeps the count+1 smallest values added: the page and whether
// more follow.
type smallest[T cmp.Ordered] struct {
	count int
	h     maxHeap[T]
}

func newSmallest[T cmp.Ordered](count int) *smallest[T] {
	return &smallest[T]{count: max(count, 0)}
}

// wants reports whether v would be kept.
func (s *smallest[T]) wants(v T) bool { return len(s.h) <= s.count || v < s.h[0] }

func (s *smallest[T]) add(v T) {
	heap.Push(&s.h, v)
	if len(s.h) > s.count+1 {
		heap.Pop(&s.h)
	}
}

// sorted returns the count smallest in increasing order, and whether more
// were added.
func (s *smallest[T]) sorted() ([]T, bool) {
	out := slices.Clone([]T(s.h))
	slices.Sort(out)
	if len(out) > s.count {
		return out[:s.count], true
	}
	return out, false
}

// maxHeap has the largest value on top, the one to drop.
type maxHeap[T cmp.Ordered] []T

func (h maxHeap[T]) Len() int           { return len(h) }
func (h maxHeap[T]) Less(i, j int) bool { return h[i] > h[j] }
func (h maxHeap[T]) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *maxHeap[T]) Push(x any)        { *h = append(*h, x.(T)) }
func (h *maxHeap[T]) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
