package server

import (
	"context"
	"slices"
	"sync"
)

// latches serialize the transactions (Node.Update) that name the same keys
// on this leader, so that one on a busy key waits its turn instead of
// conflicting again and again with the others. They guard nothing by
// themselves: a transaction's guards do (fsm.Txn), against every other
// writer too.
type latches struct {
	mu   sync.Mutex // guards m and free
	m    map[string]*latch
	free []*latch // unused latches, for the next keys
}

// maxFreeLatches bounds the latches kept for reuse.
const maxFreeLatches = 1024

// latch is one key's: a one-slot channel held by the transaction in turn,
// and how many transactions hold or wait for it.
type latch struct {
	slot chan struct{}
	refs int
}

func newLatches() *latches { return &latches{m: make(map[string]*latch)} }

// held is the latches a transaction holds, to give back with unlock.
type held struct {
	keys    []string
	latches []*latch
	inline  [2]*latch // latches' storage for one or two keys
}

// lock takes the latches of keys, in sorted order (so two transactions never
// wait for each other), into h. If ctx ends first it gives back what it took
// and returns ctx's error.
func (ls *latches) lock(ctx context.Context, keys []string, h *held) error {
	if !sortedUnique(keys) {
		keys = slices.Clone(keys)
		slices.Sort(keys)
		keys = slices.Compact(keys)
	}
	h.keys, h.latches = keys, h.inline[:0]
	for _, k := range keys {
		l := ls.get(k)
		select {
		case l.slot <- struct{}{}:
			// Free: ctx is not asked for its channel (which it may have to
			// make).
			h.latches = append(h.latches, l)
			continue
		default:
		}
		select {
		case l.slot <- struct{}{}:
			h.latches = append(h.latches, l)
		case <-ctx.Done():
			ls.put(k, l)
			ls.unlock(h)
			return ctx.Err()
		}
	}
	return nil
}

// unlock gives back the latches h holds.
func (ls *latches) unlock(h *held) {
	for i, l := range h.latches {
		<-l.slot
		ls.put(h.keys[i], l)
	}
	h.latches = h.latches[:0]
}

// sortedUnique reports whether keys are in strictly increasing order, as
// they usually come (one key), so that lock need not copy them.
func sortedUnique(keys []string) bool {
	for i := 1; i < len(keys); i++ {
		if keys[i] <= keys[i-1] {
			return false
		}
	}
	return true
}

func (ls *latches) get(key string) *latch {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	l := ls.m[key]
	if l == nil {
		if n := len(ls.free); n > 0 {
			l, ls.free = ls.free[n-1], ls.free[:n-1]
		} else {
			l = &latch{slot: make(chan struct{}, 1)}
		}
		ls.m[key] = l
	}
	l.refs++
	return l
}

func (ls *latches) put(key string, l *latch) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if l.refs--; l.refs == 0 {
		delete(ls.m, key)
		// Its slot is empty: every holder gave it back before put.
		if len(ls.free) < maxFreeLatches {
			ls.free = append(ls.free, l)
		}
	}
}
