//go:build linux

package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencerlock/fencer/fence"
)

// Workloads wlRWLock and wlSemaphore (issue 20): read-write locks and a
// semaphore under the campaign's faults, over plain RESP.
//
// wlRWLock: clients take read locks (three in four) or write locks on two
// keys with FENCE.RLOCK/WLOCK and WAIT. A reader reads the key's register
// in an in-process store guarded by fence.RWMemory; a writer reads it and
// writes it back with its own ID appended. Holds last up to a tenth of the
// TTL, so readers overlap; now and then a client pauses past its TTL
// before its read or write (as a stopped process would), and a lease is
// sometimes extended once, or left to expire instead of released.
//
// wlSemaphore: clients take permits of a semaphore of semPermits with
// FENCE.SEMACQUIRE and WAIT and do workload 3's fenced read-modify-write
// on the register of their slot (fence.SlotResource, the plain rule), with
// pauses past the TTL now and then; a permit is released, or extended once,
// or left to expire.
//
// Their grants stay out of the shared log: readers and permits hold
// together, which the early-expiry checker would take for two owners of
// one lock. Their checkers, on the clients' validity windows (from the
// acquire's send time to the TTL's end, or an acknowledged EXTEND's, or
// the first RELEASE that may have taken effect): no grant of a key
// returns while a conflicting grant's window is open (a writer with
// anyone, two permits of one slot); never more than semPermits windows of
// permits open at once, every slot within 0..semPermits-1; tokens unique
// and increasing in real-time order (checkTokens), so per key for writers
// and per slot for permits; and the stores' own checks: no acknowledged
// write lost, writes accepted in token order, and a read with token t saw
// exactly the writes with tokens below t.
const (
	sharedTTL  = 1500 * time.Millisecond
	sharedWait = 3 * time.Second
	rwKeys     = 2
	semPermits = 3
	semKey     = "sem-0"
)

// sharedGrant is one grant of a shared key.
type sharedGrant struct {
	grant
	mode string // "read", "write" or "permit"
	slot int
}

// sharedLog collects a workload's grants.
type sharedLog struct {
	mu     sync.Mutex
	grants []sharedGrant
}

func (l *sharedLog) add(g sharedGrant) {
	if g.released == 0 {
		g.released = 1<<63 - 1
	}
	l.mu.Lock()
	l.grants = append(l.grants, g)
	l.mu.Unlock()
}

func (l *sharedLog) all() []sharedGrant {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.grants)
}

// acquireShared sends args, an acquire of a shared key in mode by owner,
// within timeout, and returns the grant if one was acknowledged. An unknown
// outcome is released until known.
func (cl *client) acquireShared(workload, mode, key, owner string, timeout time.Duration, args ...string) (sharedGrant, bool) {
	v, out, call, ret := cl.do(timeout, args...)
	switch out {
	case unknown:
		releaseUntilKnown(cl, key, owner, nil)
		return sharedGrant{}, false
	case failed:
		return sharedGrant{}, false
	}
	if v == nil {
		return sharedGrant{}, false
	}
	slot := 0
	if a, isArr := v.([]any); mode == "permit" && isArr && len(a) == 3 {
		s, isInt := a[0].(int64)
		if !isInt {
			cl.count.odd(args[0], v)
			return sharedGrant{}, false
		}
		slot, v = int(s), a[1:]
	} else if mode == "permit" {
		cl.count.odd(args[0], v)
		return sharedGrant{}, false
	}
	tok, granted, err := asGrant(v)
	if err != nil || !granted {
		cl.count.odd(args[0], v)
		return sharedGrant{}, false
	}
	return sharedGrant{mode: mode, slot: slot, grant: grant{workload: workload, key: key, owner: owner, token: tok,
		ttl: sharedTTL, call: call, ret: ret, validUntil: call + int64(sharedTTL)}}, true
}

// finishShared ends a grant one of three ways: release (seven in ten),
// extend once and release (one in ten), or let it expire.
func finishShared(cl *client, g *sharedGrant) {
	switch r := cl.rng.IntN(10); {
	case r < 7:
	case r < 8:
		v, out, call, _ := cl.do(clientTimeout, "FENCE.EXTEND", g.key, g.owner, ms(g.ttl))
		if n, isInt := v.(int64); out == ok && isInt && n == 1 {
			g.validUntil = max(g.validUntil, call+int64(g.ttl))
		}
		time.Sleep(time.Duration(cl.rng.Int64N(int64(sharedTTL / 10))))
	default:
		return
	}
	releaseUntilKnown(cl, g.key, g.owner, &g.grant)
}

// rwStore is a store of registers guarded by fence.RWMemory.
type rwStore struct {
	validator *fence.RWMemory
	mu        sync.Mutex
	lists     map[string][]string
	accepted  []storeWrite // in the order the store applied them
	reads     []rwRead
}

// rwRead is one read the store admitted.
type rwRead struct {
	key, owner string
	token      uint64
	list       []string
}

func newRWStore() *rwStore {
	return &rwStore{validator: fence.NewRWMemory(), lists: make(map[string][]string)}
}

func (s *rwStore) read(key, owner string, token uint64) ([]string, error) {
	var out []string
	err := s.validator.AdmitRead(context.Background(), key, token, func(context.Context) error {
		s.mu.Lock()
		out = slices.Clone(s.lists[key])
		s.reads = append(s.reads, rwRead{key: key, owner: owner, token: token, list: out})
		s.mu.Unlock()
		return nil
	})
	return out, err
}

func (s *rwStore) write(key string, token uint64, id string, list []string) error {
	return s.validator.AdmitWrite(context.Background(), key, token, func(context.Context) error {
		s.mu.Lock()
		s.lists[key] = list
		s.accepted = append(s.accepted, storeWrite{key: key, id: id, token: token})
		s.mu.Unlock()
		return nil
	})
}

// rwWorkload is workload wlRWLock.
type rwWorkload struct {
	log                          sharedLog
	store                        *rwStore
	paused, stale, acked, readOK atomic.Int64
	mu                           sync.Mutex
	ackedIDs                     map[string][]string // key → IDs of acknowledged writes
}

func newRWWorkload() *rwWorkload {
	return &rwWorkload{store: newRWStore(), ackedIDs: make(map[string][]string)}
}

func (w *rwWorkload) run(cl *client, stop <-chan struct{}) {
	for !stopped(stop) {
		key := fmt.Sprintf("rwreg-%d", cl.rng.IntN(rwKeys))
		mode, cmd := "read", "FENCE.RLOCK"
		if cl.rng.IntN(4) == 0 {
			mode, cmd = "write", "FENCE.WLOCK"
		}
		owner := cl.owner()
		if g, granted := cl.acquireShared("rwlock", mode, key, owner, clientTimeout+sharedWait,
			cmd, key, owner, ms(sharedTTL), "WAIT", ms(sharedWait)); granted {
			w.use(cl, &g)
			finishShared(cl, &g)
			w.log.add(g)
		}
		cl.think()
	}
}

// use reads the register under g (and writes it, for a writer), pausing
// past the TTL one time in twenty, before the read or before the write.
func (w *rwWorkload) use(cl *client, g *sharedGrant) {
	pause := cl.rng.IntN(20) == 0
	pauseFirst := g.mode == "read" || cl.rng.IntN(2) == 0
	if pause && pauseFirst {
		w.pause(cl)
	}
	list, err := w.store.read(g.key, g.owner, g.token)
	if err != nil {
		w.countStale(err)
		return
	}
	w.readOK.Add(1)
	time.Sleep(time.Duration(cl.rng.Int64N(int64(sharedTTL / 10))))
	if g.mode != "write" {
		return
	}
	if pause && !pauseFirst {
		w.pause(cl)
	}
	if err := w.store.write(g.key, g.token, g.owner, append(list, g.owner)); err != nil {
		w.countStale(err)
		return
	}
	w.acked.Add(1)
	w.mu.Lock()
	w.ackedIDs[g.key] = append(w.ackedIDs[g.key], g.owner)
	w.mu.Unlock()
}

func (w *rwWorkload) pause(cl *client) {
	w.paused.Add(1)
	time.Sleep(2*sharedTTL + time.Duration(cl.rng.Int64N(int64(sharedTTL))))
}

func (w *rwWorkload) countStale(err error) {
	var stale *fence.StaleTokenError
	if errors.As(err, &stale) {
		w.stale.Add(1)
	}
}

// check runs the workload's checkers.
func (w *rwWorkload) check(restarts []int64) []checkResult {
	gs := w.log.all()
	res := checkSharedWindows("read-write locks: no conflicting holders", gs, 0)
	tok := checkTokens(plainGrants(gs), restarts)
	tok.name = "read-write locks: tokens unique and increasing"
	return []checkResult{res, tok, w.checkStore()}
}

// checkStore: every acknowledged write is in its register exactly once,
// the register is the accepted writes in order, which is increasing token
// order, and every admitted read saw exactly the accepted writes with
// smaller tokens.
func (w *rwWorkload) checkStore() checkResult {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.store
	s.mu.Lock()
	defer s.mu.Unlock()
	res := checkResult{name: "read-write locks: fenced reads and writes", checked: len(s.accepted) + len(s.reads)}
	byKey := make(map[string][]storeWrite)
	for _, a := range s.accepted {
		ws := byKey[a.key]
		if n := len(ws); n > 0 && a.token <= ws[n-1].token {
			res.violations = append(res.violations, fmt.Sprintf("%s: the store accepted %s with token %d after %s with token %d",
				a.key, a.id, a.token, ws[n-1].id, ws[n-1].token))
		}
		byKey[a.key] = append(ws, a)
	}
	for key, ws := range byKey {
		var ids []string
		for _, a := range ws {
			ids = append(ids, a.id)
		}
		if !slices.Equal(ids, s.lists[key]) {
			res.violations = append(res.violations, fmt.Sprintf("%s: the register holds %v, the accepted writes were %v", key, s.lists[key], ids))
		}
		for _, id := range w.ackedIDs[key] {
			if n := countOf(s.lists[key], id); n != 1 {
				res.violations = append(res.violations, fmt.Sprintf("%s: acknowledged write %s appears %d times", key, id, n))
			}
		}
	}
	for _, r := range s.reads {
		var want []string
		for _, a := range byKey[r.key] {
			if a.token < r.token {
				want = append(want, a.id)
			}
		}
		if !slices.Equal(r.list, want) {
			res.violations = append(res.violations, fmt.Sprintf("%s: %s read %v with token %d; the writes below its token are %v",
				r.key, r.owner, r.list, r.token, want))
		}
	}
	res.notes = append(res.notes, fmt.Sprintf("%d reads admitted, %d writes acknowledged, %d refused as stale, %d client pauses past the TTL",
		w.readOK.Load(), w.acked.Load(), w.stale.Load(), w.paused.Load()))
	return res
}

func countOf(list []string, id string) int {
	n := 0
	for _, x := range list {
		if x == id {
			n++
		}
	}
	return n
}

// semWorkload is workload wlSemaphore.
type semWorkload struct {
	log sharedLog
	// fenced is workload 3's store and checker, on the slots' registers.
	fenced *fencedWorkload
}

func newSemWorkload() *semWorkload {
	return &semWorkload{fenced: newFencedWorkload(&grantLog{})}
}

func (w *semWorkload) run(cl *client, stop <-chan struct{}) {
	for !stopped(stop) {
		owner := cl.owner()
		if g, granted := cl.acquireShared("semaphore", "permit", semKey, owner, clientTimeout+sharedWait,
			"FENCE.SEMACQUIRE", semKey, owner, ms(sharedTTL), fmt.Sprint(semPermits), "WAIT", ms(sharedWait)); granted {
			if g.slot >= 0 && g.slot < semPermits {
				if cl.rng.IntN(20) == 0 {
					w.fenced.requestPauses(1)
				}
				w.fenced.readModifyWrite(cl, fence.SlotResource(semKey, g.slot), owner, g.token)
			}
			time.Sleep(time.Duration(cl.rng.Int64N(int64(sharedTTL / 10))))
			finishShared(cl, &g)
			w.log.add(g)
		}
		cl.think()
	}
}

// check runs the workload's checkers.
func (w *semWorkload) check(restarts []int64) []checkResult {
	gs := w.log.all()
	res := checkSharedWindows("semaphore: at most its permits, one holder per slot", gs, semPermits)
	tok := checkTokens(plainGrants(gs), restarts)
	tok.name = "semaphore: tokens unique and increasing"
	f := w.fenced.check()
	f.name = "semaphore: fenced read-modify-write per slot"
	return []checkResult{res, tok, f}
}

// plainGrants returns the grants without their modes.
func plainGrants(gs []sharedGrant) []grant {
	out := make([]grant, len(gs))
	for i, g := range gs {
		out[i] = g.grant
	}
	return out
}

// sharedConflict reports whether two grants of one key may not be valid at
// once: a writer with anyone, two permits of one slot.
func sharedConflict(a, b sharedGrant) bool {
	if a.key != b.key || a.owner == b.owner {
		return false
	}
	if a.mode == "permit" || b.mode == "permit" {
		return a.mode == b.mode && a.slot == b.slot
	}
	return a.mode == "write" || b.mode == "write"
}

// checkSharedWindows checks the grants' validity windows: of two
// conflicting grants, the later (larger token) never returns before the
// earlier's window closes (its validUntil, or the send of its first
// release that may have taken effect); with permits > 0, never more than
// permits windows of one key open at once, and every slot in range.
func checkSharedWindows(name string, gs []sharedGrant, permits int) checkResult {
	res := checkResult{name: name, checked: len(gs)}
	end := func(g sharedGrant) int64 { return min(g.validUntil, g.released) }
	byKey := make(map[string][]sharedGrant)
	for _, g := range gs {
		byKey[g.key] = append(byKey[g.key], g)
		if g.mode == "permit" && (g.slot < 0 || g.slot >= permits) {
			res.violations = append(res.violations, fmt.Sprintf("%s: %s got slot %d of %d permits", g.key, g.owner, g.slot, permits))
		}
	}
	most := 0
	for key, ks := range byKey {
		sort.Slice(ks, func(i, j int) bool { return ks[i].token < ks[j].token })
		for j := range ks {
			for i := range j {
				a, b := ks[i], ks[j]
				if sharedConflict(a, b) && b.ret < end(a) {
					res.violations = append(res.violations, fmt.Sprintf(
						"%s: %s (%s, slot %d) got token %d at +%v, while %s (%s, slot %d, token %d, acquire sent at +%v) was valid until +%v and not released",
						key, b.owner, b.mode, b.slot, b.token, time.Duration(b.ret), a.owner, a.mode, a.slot, a.token,
						time.Duration(a.call), time.Duration(end(a))))
				}
			}
		}
		if permits == 0 {
			continue
		}
		// Windows open at once: [ret, end), ends before starts at a tie.
		type edge struct {
			at    int64
			delta int
		}
		var es []edge
		for _, g := range ks {
			if e := end(g); g.ret < e {
				es = append(es, edge{g.ret, 1}, edge{e, -1})
			}
		}
		sort.Slice(es, func(i, j int) bool {
			if es[i].at == es[j].at {
				return es[i].delta < es[j].delta
			}
			return es[i].at < es[j].at
		})
		n := 0
		for _, e := range es {
			n += e.delta
			most = max(most, n)
			if n > permits {
				res.violations = append(res.violations, fmt.Sprintf("%s: %d permits valid at once at +%v, the semaphore has %d", key, n, time.Duration(e.at), permits))
			}
		}
	}
	if permits > 0 {
		res.notes = append(res.notes, fmt.Sprintf("at most %d permits' windows open at once", most))
	}
	return res
}

// TestChaosRWLock runs the campaign on three nodes with the read-write lock
// workload alone, three clients per node unless CHAOS_CLIENTS says.
func TestChaosRWLock(t *testing.T) { testChaosWorkload(t, wlRWLock, 3) }

// TestChaosSemaphore runs the campaign on three nodes with the semaphore
// workload alone, three clients per node unless CHAOS_CLIENTS says.
func TestChaosSemaphore(t *testing.T) { testChaosWorkload(t, wlSemaphore, 3) }

// TestSharedChecks: the shared workloads' checkers accept correct made-up
// histories and reject the violations they exist for.
func TestSharedChecks(t *testing.T) {
	ms := func(n int64) int64 { return n * int64(time.Millisecond) }
	g := func(mode string, slot int, owner string, tok uint64, call, ret, released int64) sharedGrant {
		rel := ms(released)
		if released == 0 {
			rel = 1<<63 - 1 // never released, as sharedLog.add records it
		}
		return sharedGrant{mode: mode, slot: slot, grant: grant{key: "k", owner: owner, token: tok, ttl: time.Second,
			call: ms(call), ret: ms(ret), validUntil: ms(call) + int64(time.Second), released: rel}}
	}
	tests := []struct {
		name    string
		gs      []sharedGrant
		permits int
		bad     bool
	}{
		{"readers together", []sharedGrant{g("read", 0, "a", 1, 0, 1, 0), g("read", 0, "b", 2, 2, 3, 0)}, 0, false},
		{"writer after a released reader", []sharedGrant{g("read", 0, "a", 1, 0, 1, 5), g("write", 0, "b", 2, 2, 6, 0)}, 0, false},
		{"writer after an expired reader", []sharedGrant{g("read", 0, "a", 1, 0, 1, 0), g("write", 0, "b", 2, 2, 1001, 0)}, 0, false},
		{"writer while a reader is valid", []sharedGrant{g("read", 0, "a", 1, 0, 1, 0), g("write", 0, "b", 2, 2, 999, 0)}, 0, true},
		{"reader while a writer is valid", []sharedGrant{g("write", 0, "a", 1, 0, 1, 500), g("read", 0, "b", 2, 2, 400, 0)}, 0, true},
		{"three permits", []sharedGrant{g("permit", 0, "a", 1, 0, 1, 0), g("permit", 1, "b", 2, 0, 1, 0), g("permit", 2, "c", 3, 0, 1, 0)}, 3, false},
		{"a slot twice", []sharedGrant{g("permit", 0, "a", 1, 0, 1, 0), g("permit", 0, "b", 2, 2, 3, 0)}, 3, true},
		{"slot out of range", []sharedGrant{g("permit", 3, "a", 1, 0, 1, 0)}, 3, true},
		{"four permits", []sharedGrant{g("permit", 0, "a", 1, 0, 1, 0), g("permit", 1, "b", 2, 0, 1, 0), g("permit", 2, "c", 3, 0, 1, 0), g("permit", 3, "d", 4, 0, 2, 0)}, 4, false},
		{"four permits of three", []sharedGrant{g("permit", 0, "a", 1, 0, 1, 0), g("permit", 1, "b", 2, 0, 1, 0), g("permit", 2, "c", 3, 0, 1, 0), g("permit", 0, "d", 4, 0, 1100, 0)}, 3, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := checkSharedWindows("test", tc.gs, tc.permits).violations
			if (len(got) > 0) != tc.bad {
				t.Errorf("violations %v, want any: %v", got, tc.bad)
			}
		})
	}
	// Four windows of four slots open at once, counted against three permits.
	four := []sharedGrant{g("permit", 0, "a", 1, 0, 1, 0), g("permit", 1, "b", 2, 0, 1, 0), g("permit", 2, "c", 3, 0, 1, 0), g("permit", 3, "d", 4, 0, 2, 0)}
	if got := checkSharedWindows("test", four, 4).violations; len(got) != 0 {
		t.Errorf("four permits of four: %v", got)
	}
	if got := checkSharedWindows("test", four[1:], 3).violations; len(got) == 0 {
		t.Error("slot 3 of three permits was not seen")
	}
	// The count alone: a's second grant (the same owner, so no conflict of
	// slots) makes four windows open at once.
	again := append(slices.Clone(four[:3]), g("permit", 0, "a", 1, 2, 3, 0))
	if got := checkSharedWindows("test", again, 3).violations; len(got) != 1 {
		t.Errorf("four permits' windows open at once: %v, want one violation", got)
	}

	// The store: a reader sees the writes below its token; a read that
	// missed one is reported.
	w := newRWWorkload()
	if err := w.store.write("r", 5, "w5", []string{"w5"}); err != nil {
		t.Fatal(err)
	}
	w.ackedIDs["r"] = []string{"w5"}
	if _, err := w.store.read("r", "r7", 7); err != nil {
		t.Fatal(err)
	}
	if _, err := w.store.read("r", "r3", 3); err == nil {
		t.Fatal("RWMemory admitted a read below the writer's token")
	}
	if v := w.checkStore().violations; len(v) != 0 {
		t.Fatalf("clean history: %v", v)
	}
	w.store.reads = append(w.store.reads, rwRead{key: "r", owner: "r9", token: 9})
	if v := w.checkStore().violations; len(v) != 1 {
		t.Fatalf("a read that missed a write: %v", v)
	}
}
