package server

import (
	"slices"
	"time"

	"github.com/fencerlock/fencer/fsm"
)

// waitQueues holds the acquires queued on this leader, per key, in arrival
// order. There is at most one waiter per (key, owner): a newer wait takes the
// place of the older one, which is answered "not granted", so a client that
// reissues its wait keeps its place in the line.
//
// All methods are called with grants.mu held.
type waitQueues struct {
	byKey map[string][]*waiter
}

// waiter is one queued acquire. done is buffered so that the node never
// blocks delivering to it.
type waiter struct {
	key, owner string
	ttl        uint64 // milliseconds; zero under a session
	session    uint64 // the session it acquires under (zero: none)
	value      string // the lock's value under the session
	mode       fsm.Mode
	permits    uint64 // a semaphore's
	// keys, for a multi-key acquire (AcquireMany), are all its keys (key
	// is the first): the same waiter stands in each of their queues, and
	// wake tells its acquire that it may be granted now.
	keys     []string
	wake     chan struct{}
	marked   []string // keys a multi-key grant in flight marks granting
	done     chan waitOutcome
	answered bool
	// since is when it joined the line: a newer round that takes its
	// place keeps it (listings show how long it has waited).
	since time.Time
}

type waitOutcome struct {
	grant   Grant
	granted bool
	err     error
}

func newWaitQueues() *waitQueues {
	return &waitQueues{byKey: make(map[string][]*waiter)}
}

// add queues w, replacing the waiter with the same owner in place.
func (q *waitQueues) add(w *waiter) {
	if w.since.IsZero() {
		w.since = time.Now()
	}
	line := q.byKey[w.key]
	for i, old := range line {
		if old.owner == w.owner && old.keys == nil {
			old.answer(waitOutcome{})
			w.since = old.since
			line[i] = w
			return
		}
	}
	q.byKey[w.key] = append(line, w)
}

// head returns the first waiter for key, or nil.
func (q *waitQueues) head(key string) *waiter {
	if line := q.byKey[key]; len(line) > 0 {
		return line[0]
	}
	return nil
}

// addMany queues the multi-key waiter m at the end of each of its keys'
// queues, or, in place of a waiter for the same keys by the same owner
// under the same session that has no grant in flight, answering that one
// null (as add does for one key): a client's newer round of a wait keeps
// the older one's place in every queue.
func (q *waitQueues) addMany(m *waiter) {
	if m.since.IsZero() {
		m.since = time.Now()
	}
	for _, old := range q.byKey[m.keys[0]] {
		if old != m && old.keys != nil && old.owner == m.owner && old.session == m.session &&
			len(old.marked) == 0 && slices.Equal(old.keys, m.keys) {
			m.since = old.since
			for _, k := range m.keys {
				line := q.byKey[k]
				line[slices.Index(line, old)] = m
			}
			old.answer(waitOutcome{})
			return
		}
	}
	for _, k := range m.keys {
		q.byKey[k] = append(q.byKey[k], m)
	}
}

// removeMany takes the multi-key waiter m out of every queue.
func (q *waitQueues) removeMany(m *waiter) {
	for _, k := range m.keys {
		line := q.byKey[k]
		if i := slices.Index(line, m); i >= 0 {
			line = slices.Delete(line, i, i+1)
			if len(line) == 0 {
				delete(q.byKey, k)
			} else {
				q.byKey[k] = line
			}
		}
	}
}

// take removes and returns the single-key waiter for (key, owner), or nil.
func (q *waitQueues) take(key, owner string) *waiter {
	line := q.byKey[key]
	for i, w := range line {
		if w.owner == owner && w.keys == nil {
			copy(line[i:], line[i+1:])
			line[len(line)-1] = nil
			line = line[:len(line)-1]
			if len(line) == 0 {
				delete(q.byKey, key)
			} else {
				q.byKey[key] = line
			}
			return w
		}
	}
	return nil
}

// queued reports whether a single-key waiter of owner stands in key's queue.
func (q *waitQueues) queued(key, owner string) bool {
	for _, x := range q.byKey[key] {
		if x.owner == owner && x.keys == nil {
			return true
		}
	}
	return false
}

// takeFor removes and returns the waiter for (key, owner) if it acquires
// under session (zero: none) in mode with permits; nil if there is none, or
// it asks for another session, mode or number of permits (it then stays
// queued).
func (q *waitQueues) takeFor(key, owner string, session uint64, mode fsm.Mode, permits uint64) *waiter {
	for _, x := range q.byKey[key] {
		if x.owner == owner && x.keys == nil {
			if x.session != session || x.mode != mode || x.permits != permits {
				return nil
			}
			return q.take(key, owner)
		}
	}
	return nil
}

// remove removes w if it is still queued and reports whether it was.
func (q *waitQueues) remove(w *waiter) bool {
	for _, x := range q.byKey[w.key] {
		if x == w {
			q.take(w.key, w.owner)
			return true
		}
	}
	return false
}

// failAll answers every waiter with err and empties the queues.
func (q *waitQueues) failAll(err error) {
	for _, line := range q.byKey {
		for _, w := range line {
			w.answer(waitOutcome{err: err})
		}
	}
	q.byKey = make(map[string][]*waiter)
}

// failSession answers every waiter under session id with err and removes
// it; it returns the keys whose queues it changed.
func (q *waitQueues) failSession(id uint64, err error) []string {
	var keys []string
	for key, line := range q.byKey {
		kept := line[:0]
		for _, w := range line {
			if w.session == id {
				w.answer(waitOutcome{err: err})
				continue
			}
			kept = append(kept, w)
		}
		if len(kept) == len(line) {
			continue
		}
		clear(line[len(kept):])
		if len(kept) == 0 {
			delete(q.byKey, key)
		} else {
			q.byKey[key] = kept
		}
		keys = append(keys, key)
	}
	return keys
}

// count returns the number of queued waiters.
func (q *waitQueues) count() int {
	n := 0
	for _, line := range q.byKey {
		n += len(line)
	}
	return n
}

func (w *waiter) answer(o waitOutcome) {
	if w.answered {
		return
	}
	w.answered = true
	w.done <- o
}

// The grants' reads of the wait queue.

// hasWaitersLocked reports whether an acquire waits for key.
func (g *grants) hasWaitersLocked(key string) bool { return g.waits.head(key) != nil }

// waiting returns the number of queued acquires.
func (g *grants) waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waits.count()
}

// releasing answers owner's waits for key "not granted" and takes them out
// of the queues (its owner releases key: it gave up), then returns the
// first waiter left, as headWaiter does. A grant to its single-key wait
// already in flight reaches no caller: the release entry, which comes
// after it, frees it. A multi-key wait whose grant is in flight is left to
// its acquire, which is still running and answers it.
func (g *grants) releasing(key, owner string) *fsm.Waiter {
	g.mu.Lock()
	defer g.mu.Unlock()
	if w := g.waits.take(key, owner); w != nil {
		w.answer(waitOutcome{})
	}
	for _, m := range slices.Clone(g.waits.byKey[key]) {
		if m.owner != owner || m.keys == nil || len(m.marked) > 0 {
			continue
		}
		g.waits.removeMany(m)
		m.answer(waitOutcome{})
		for _, k := range m.keys {
			if k != key {
				// The release entry hands key to its next waiter.
				g.grantHeadLocked(k)
			}
		}
	}
	return g.headWaiterLocked(key)
}

// headWaiter returns the first waiter for key as an fsm.Waiter, or nil.
func (g *grants) headWaiter(key string) *fsm.Waiter {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.headWaiterLocked(key)
}

func (g *grants) headWaiterLocked(key string) *fsm.Waiter {
	if w := g.waits.head(key); w != nil && w.keys == nil {
		return &fsm.Waiter{Owner: w.owner, TTL: w.ttl, Session: w.session, Value: w.value, Mode: w.mode, Permits: w.permits}
	}
	// None, or a multi-key acquire, which no entry of one key can grant
	// (grantHeadLocked wakes it).
	return nil
}

// sessionWaitBudget bounds the bytes of waiters a session's end carries:
// the keys beyond it are freed without a hand-off, and appliedLocked hands
// each to its head waiter in an entry of its own right after.
const sessionWaitBudget = 1 << 20

// sessionWaitersLocked returns the head waiter of each of session id's
// keys that has one, in key order, up to sessionWaitBudget bytes.
func (g *grants) sessionWaitersLocked(id uint64) []fsm.KeyWaiter {
	keys, _ := g.table.SessionKeys(id)
	var out []fsm.KeyWaiter
	size := 0
	for _, k := range keys {
		w := g.headWaiterLocked(k)
		if w == nil {
			continue
		}
		if size += len(k) + len(w.Owner) + len(w.Value) + 24; size > sessionWaitBudget {
			break
		}
		out = append(out, fsm.KeyWaiter{Key: k, Waiter: *w})
	}
	return out
}
