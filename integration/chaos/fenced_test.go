//go:build linux

package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencerlock/fencer/fence"
)

// Workload 3: read-modify-write of a register in an in-process store that
// fence.Memory guards. A client takes the lock, reads the register (the
// read admits its token too), appends its own ID and writes the register
// back, then releases. Client pauses longer than the TTL are injected
// between those steps, so stale holders do write late: the store must
// refuse them, and no acknowledged write may be lost.
const (
	fencedTTL  = 1500 * time.Millisecond
	fencedWait = 3 * time.Second
	fencedKeys = 2
)

// fencedStore is the protected storage: one list of write IDs per register.
type fencedStore struct {
	validator *fence.Memory
	mu        sync.Mutex
	lists     map[string][]string
	accepted  []storeWrite // in the order the store applied them
}

// storeWrite is one write the store accepted.
type storeWrite struct {
	key, id string
	token   uint64
}

func newFencedStore() *fencedStore {
	return &fencedStore{validator: fence.NewMemory(), lists: make(map[string][]string)}
}

// read returns the register, admitting token first.
func (s *fencedStore) read(key string, token uint64) ([]string, error) {
	var out []string
	err := s.validator.Admit(context.Background(), key, token, func(context.Context) error {
		s.mu.Lock()
		out = slices.Clone(s.lists[key])
		s.mu.Unlock()
		return nil
	})
	return out, err
}

// write replaces the register if token is admitted.
func (s *fencedStore) write(key string, token uint64, id string, list []string) error {
	return s.validator.Admit(context.Background(), key, token, func(context.Context) error {
		s.mu.Lock()
		s.lists[key] = list
		s.accepted = append(s.accepted, storeWrite{key: key, id: id, token: token})
		s.mu.Unlock()
		return nil
	})
}

// fencedWorkload is workload 3.
type fencedWorkload struct {
	grants *grantLog
	store  *fencedStore
	// pauses is how many client pauses the nemesis has asked for and no
	// client has taken yet.
	pauses               atomic.Int64
	paused, stale, acked atomic.Int64

	mu        sync.Mutex
	ackedIDs  map[string][]string // key → IDs of acknowledged writes
	ackedToks map[string]uint64   // ID → token
}

func newFencedWorkload(grants *grantLog) *fencedWorkload {
	return &fencedWorkload{grants: grants, store: newFencedStore(),
		ackedIDs: make(map[string][]string), ackedToks: make(map[string]uint64)}
}

// requestPauses makes the next n clients to hold a grant pause past its TTL.
func (w *fencedWorkload) requestPauses(n int) { w.pauses.Add(int64(n)) }

// pause sleeps past the TTL if a pause is pending.
func (w *fencedWorkload) pause(cl *client) {
	for {
		n := w.pauses.Load()
		if n <= 0 {
			return
		}
		if w.pauses.CompareAndSwap(n, n-1) {
			break
		}
	}
	w.paused.Add(1)
	time.Sleep(2*fencedTTL + time.Duration(cl.rng.Int64N(int64(fencedTTL))))
}

func (w *fencedWorkload) run(cl *client, stop <-chan struct{}) {
	for !stopped(stop) {
		key := fmt.Sprintf("reg-%d", cl.rng.IntN(fencedKeys))
		owner := cl.owner()
		if g, granted := cl.acquire("fenced", key, owner, fencedTTL, clientTimeout+fencedWait, "WAIT", ms(fencedWait)); granted {
			w.readModifyWrite(cl, key, owner, g.token)
			releaseUntilKnown(cl, key, owner, &g)
			w.grants.add(g)
		}
		cl.think()
	}
}

// readModifyWrite appends owner to the register under token.
func (w *fencedWorkload) readModifyWrite(cl *client, key, owner string, tok uint64) {
	pauseFirst := cl.rng.IntN(2) == 0
	if pauseFirst {
		w.pause(cl)
	}
	list, err := w.store.read(key, tok)
	if err != nil {
		w.countStale(err)
		return
	}
	if !pauseFirst {
		w.pause(cl)
	}
	if err := w.store.write(key, tok, owner, append(list, owner)); err != nil {
		w.countStale(err)
		return
	}
	w.ack(key, owner, tok)
}

// ack records owner's write to key under tok as acknowledged: the check
// looks for it in the register.
func (w *fencedWorkload) ack(key, owner string, tok uint64) {
	w.acked.Add(1)
	w.mu.Lock()
	w.ackedIDs[key] = append(w.ackedIDs[key], owner)
	w.ackedToks[owner] = tok
	w.mu.Unlock()
}

func (w *fencedWorkload) countStale(err error) {
	var stale *fence.StaleTokenError
	if errors.As(err, &stale) {
		w.stale.Add(1)
	}
}

// lateWriteOf reports whether write id is a late write (lateWriteID) of
// the grant whose own write, or earlier late write, is prev.
func lateWriteOf(id, prev string) bool {
	return strings.Contains(id, "/late") && grantOf(id) == grantOf(prev)
}

// lateWriteID is the ID of the n-th late write by owner's grant.
func lateWriteID(owner string, n int64) string { return fmt.Sprintf("%s/late%d", owner, n) }

// grantOf is the owner whose grant made write id.
func grantOf(id string) string {
	if i := strings.Index(id, "/late"); i >= 0 {
		return id[:i]
	}
	return id
}

// check: every acknowledged write is in its register exactly once, and the
// store accepted each register's writes in strictly increasing token order,
// but for late writes of the last grant.
func (w *fencedWorkload) check() checkResult {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.store
	s.mu.Lock()
	defer s.mu.Unlock()
	res := checkResult{name: "fenced read-modify-write", checked: int(w.acked.Load())}
	for key, ids := range w.ackedIDs {
		count := make(map[string]int)
		for _, id := range s.lists[key] {
			count[id]++
		}
		for _, id := range ids {
			switch count[id] {
			case 1:
			case 0:
				res.violations = append(res.violations, fmt.Sprintf("%s: acknowledged write %s (token %d) was lost", key, id, w.ackedToks[id]))
			default:
				res.violations = append(res.violations, fmt.Sprintf("%s: write %s appears %d times", key, id, count[id]))
			}
		}
	}
	// An equal token is a violation too (two grants with one token),
	// except for a late write of the grant that wrote last (a session's
	// holder writing again after its session ran out, before anyone else
	// was granted the lock: fencing admits it, rightly).
	last := make(map[string]storeWrite)
	for _, a := range s.accepted {
		if p, seen := last[a.key]; seen && (a.token < p.token || a.token == p.token && !lateWriteOf(a.id, p.id)) {
			res.violations = append(res.violations, fmt.Sprintf("%s: the store accepted %s with token %d after %s with token %d",
				a.key, a.id, a.token, p.id, p.token))
		}
		last[a.key] = a
	}
	res.notes = append(res.notes, fmt.Sprintf("%d writes acknowledged, %d refused as stale, %d client pauses past the TTL",
		w.acked.Load(), w.stale.Load(), w.paused.Load()))
	return res
}
