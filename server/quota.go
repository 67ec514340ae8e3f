package server

import (
	"fmt"

	"github.com/fencerlock/fencer/fsm"
	"github.com/tidwall/match"
)

// Quota bounds the locks held under one lock-name pattern: an acquire of a
// free lock whose name matches Pattern is refused with ErrLimit while Max
// such locks are held. fencerd makes one for each user of the users file
// that has a lock limit, with that user's pattern, so that one tenant cannot
// fill the table that every other tenant shares.
//
// The count is of locks, not of who took them: the table does not record
// users, and a name pattern is what a user may touch. Users with the same
// pattern count the same locks. Like MaxLocks, the leader checks before
// proposing, so concurrent acquires can overshoot by the number in flight.
type Quota struct {
	Name    string // whose quota, for the error ("user alice")
	Pattern string // glob, as in the users file: * ? [abc]
	Max     int
}

// quotas keeps the number of held locks matching each Quota's pattern, on
// every node, from the applied entries (so a new leader has it at once).
type quotas struct {
	q    []Quota
	held []int
	// shared are the shared keys counted: a shared key is one lock
	// however many hold it, so its results are counted by whether the key
	// is in the table before and after, not by grants and frees.
	shared map[string]bool
}

func newQuotas(q []Quota) *quotas {
	return &quotas{q: q, held: make([]int, len(q)), shared: make(map[string]bool)}
}

// applied counts the locks r granted and freed.
func (qs *quotas) applied(r *fsm.Result, t *fsm.Table) {
	if len(qs.q) == 0 {
		return
	}
	key := r.Cmd.Key
	if qs.shared[key] || r.Holder != nil || r.Freed != nil && r.Freed.Kind == fsm.KindShared || r.Cmd.Mode != fsm.ModeNone {
		if r.Freed == nil && r.Holder == nil && r.Waiter != fsm.WaiterGranted {
			return // nothing changed
		}
		was := qs.shared[key] || r.Freed != nil && r.Freed.Kind != fsm.KindShared
		l, now := t.Get(key)
		delete(qs.shared, key)
		if now && l.Kind == fsm.KindShared {
			qs.shared[key] = true
		}
		switch {
		case now && !was:
			qs.add(key, 1)
		case was && !now:
			qs.add(key, -1)
		}
		return
	}
	delta := 0
	if r.Freed != nil {
		delta--
	}
	// An OpGrant's Code repeats its waiter's outcome; count the grant once.
	if r.Waiter == fsm.WaiterGranted || r.Code == fsm.Granted && r.Cmd.Op != fsm.OpGrant || r.Created {
		delta++
	}
	if delta != 0 {
		qs.add(r.Cmd.Key, delta)
	}
}

func (qs *quotas) add(key string, delta int) {
	for i, q := range qs.q {
		if match.Match(key, q.Pattern) {
			qs.held[i] += delta
		}
	}
}

// recount counts again from the table, after a restore.
func (qs *quotas) recount(t *fsm.Table) {
	if len(qs.q) == 0 {
		return
	}
	clear(qs.held)
	clear(qs.shared)
	t.Range(func(key string, l fsm.Lease) {
		qs.add(key, 1)
		if l.Kind == fsm.KindShared {
			qs.shared[key] = true
		}
	})
}

// check returns ErrLimit if taking one more lock named key would pass a
// quota.
func (qs *quotas) check(key string) error {
	for i, q := range qs.q {
		if qs.held[i] >= q.Max && match.Match(key, q.Pattern) {
			return fmt.Errorf("%w: %s may hold at most %d locks (names matching %q)", ErrLimit, q.Name, q.Max, q.Pattern)
		}
	}
	return nil
}
