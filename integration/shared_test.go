package integration

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Read-write locks, semaphores and several keys at once (issue 20, "Must
// show") on a three-node cluster of fencerd processes, each test with a
// leader killed with SIGKILL in its middle. The clients and the checks
// are in shared_harness_test.go.

// shWait is the WAIT of the workloads' acquires: long beside the holds
// and an election, so that a wait that ends without a grant is starvation
// (or a deadlock), and fails the test.
const shWait = 15 * time.Second

// shProgressWithin bounds how long the workloads' clients may take to make
// progress: an election and the re-sent waits behind it, twice over.
const shProgressWithin = 2 * (clusterElectionTimeout + clusterServerTimeout)

// shLoad runs workers, each with a client of its own, that do rounds
// (acquire, hold, release) until stopped, and counts their rounds.
type shLoad struct {
	t      *testing.T
	stop   atomic.Bool
	wg     sync.WaitGroup
	rounds []atomic.Int64
}

// startLoad starts n workers; worker i runs round on its own client,
// named prefix+i, until the load is stopped or round fails.
func startLoad(t *testing.T, cl *nodeCluster, prefix string, n int, round func(i int, c *shClient) error) *shLoad {
	t.Helper()
	l := &shLoad{t: t, rounds: make([]atomic.Int64, n)}
	for i := range n {
		c := newShClient(t, cl, fmt.Sprintf("%s%d", prefix, i), i)
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for !l.stop.Load() {
				if err := round(i, c); err != nil {
					t.Errorf("%s: %v", c.name, err)
					return
				}
				l.rounds[i].Add(1)
			}
		}()
	}
	t.Cleanup(func() { l.stop.Store(true); l.wg.Wait() })
	return l
}

// counts returns every worker's rounds so far.
func (l *shLoad) counts() []int64 {
	out := make([]int64, len(l.rounds))
	for i := range l.rounds {
		out[i] = l.rounds[i].Load()
	}
	return out
}

// awaitProgress waits until every worker has done at least min rounds
// more than since, calling poll between looks; it fails the test after
// within.
func (l *shLoad) awaitProgress(since []int64, min int64, within time.Duration, poll func()) {
	t := l.t
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		now := l.counts()
		behind := -1
		for i := range now {
			if now[i] < since[i]+min {
				behind = i
				break
			}
		}
		if behind < 0 {
			return
		}
		if t.Failed() {
			t.FailNow()
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker %d did %d rounds in %v, want %d (all: %v, before: %v)", behind, now[behind]-since[behind], within, min, now, since)
		}
		if poll != nil {
			poll()
		}
		time.Sleep(clusterPollEvery)
	}
}

// runFor calls poll every clusterPollEvery for d while the workers go on,
// failing the test early if a worker failed.
func (l *shLoad) runFor(d time.Duration, poll func()) {
	l.t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(clusterPollEvery) {
		if l.t.Failed() {
			l.t.FailNow()
		}
		poll()
	}
}

// finish stops the workers and waits for them: within bounds their last
// rounds (a wait behind a deadlock would outlast it).
func (l *shLoad) finish(within time.Duration) {
	t := l.t
	t.Helper()
	l.stop.Store(true)
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(within):
		t.Fatalf("the workers did not finish their rounds within %v of being stopped (rounds: %v)", within, l.counts())
	}
}

// pollHolders returns a poll that reads FENCE.HOLDERS of keys on the
// leader and checks them with shHoldersOK.
func pollHolders(t *testing.T, cl *nodeCluster, permits int, keys ...string) func() {
	return func() {
		t.Helper()
		leader := cl.leader(t)
		for _, k := range keys {
			if err := shHoldersOK(k, cl.holders(t, leader, k), permits); err != nil {
				t.Errorf("node %d: %v", leader+1, err)
			}
		}
	}
}

// shMust fails the test on err.
func shMust(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// shAwaitQueued returns once a reader without WAIT is refused on key,
// which means someone waits for it (the readers that hold it let readers
// in otherwise). The probes granted on the way are released at once.
func shAwaitQueued(t *testing.T, cl *nodeCluster, rec *shRecords, key string) {
	t.Helper()
	p := newShClient(t, cl, "probe", 0)
	deadline := time.Now().Add(clusterRetryWithin)
	for {
		h, ok, err := p.acquire(key, "read", 0, 0)
		shMust(t, err)
		if !ok {
			return
		}
		shMust(t, p.release(rec, h))
		if time.Now().After(deadline) {
			t.Fatalf("readers without WAIT were still let into %s after %v: the writer did not queue", key, clusterRetryWithin)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// shGrant is the outcome of an acquire run on another goroutine.
type shGrant struct {
	h   shHold
	ok  bool
	err error
	at  time.Time
}

func shAcquireAsync(c *shClient, key, mode string, wait time.Duration) <-chan shGrant {
	ch := make(chan shGrant, 1)
	go func() {
		h, ok, err := c.acquire(key, mode, 0, wait)
		ch <- shGrant{h, ok, err, time.Now()}
	}()
	return ch
}

// shStillWaiting fails the test if the acquire on ch answers within d.
func shStillWaiting(t *testing.T, ch <-chan shGrant, d time.Duration, what string) {
	t.Helper()
	select {
	case g := <-ch:
		t.Fatalf("%s: answered %+v while it should wait", what, g)
	case <-time.After(d):
	}
}

// shAwaitGrant waits within d for the acquire on ch and fails the test
// unless it was granted.
func shAwaitGrant(t *testing.T, ch <-chan shGrant, d time.Duration, what string) shHold {
	t.Helper()
	select {
	case g := <-ch:
		if g.err != nil || !g.ok {
			t.Fatalf("%s: not granted: %+v", what, g)
		}
		return g.h
	case <-time.After(d):
		t.Fatalf("%s: not granted within %v", what, d)
	}
	return shHold{}
}

// TestSharedReadersOverlapWritersExclude: two readers hold at once with
// different tokens; a writer waits until both released, readers arriving
// meanwhile queue behind it, and its token is larger than theirs; a
// reader behind the writer gets in after it, with a larger token still.
// The second time round the leader is killed while the writer waits: the
// readers' leases survive on the new leader, the writer's wait is re-sent
// and the rules hold the same.
func TestSharedReadersOverlapWritersExclude(t *testing.T) {
	cl := startNodeCluster(t, 3)
	rec := &shRecords{}
	for _, kill := range []bool{false, true} {
		key := fmt.Sprintf("rw-kill-%v", kill)
		r1 := newShClient(t, cl, "r1", 0)
		r2 := newShClient(t, cl, "r2", 1)
		w := newShClient(t, cl, "w", 2)
		h1, ok, err := r1.acquire(key, "read", 0, 0)
		shMust(t, err)
		h2, ok2, err := r2.acquire(key, "read", 0, 0)
		shMust(t, err)
		if !ok || !ok2 || h1.token == h2.token {
			t.Fatalf("two readers: granted %v %v, tokens %d %d; want both, different tokens", ok, ok2, h1.token, h2.token)
		}
		wantReaders := func(hs []shHolding, rs ...shHold) {
			t.Helper()
			if len(hs) != len(rs) {
				t.Fatalf("FENCE.HOLDERS %s = %+v, want the readers %v", key, hs, rs)
			}
			for i, r := range rs {
				if hs[i].owner != r.owner || hs[i].token != r.token || hs[i].mode != "read" || hs[i].remainingMS <= 0 {
					t.Fatalf("FENCE.HOLDERS %s = %+v, want the readers %v", key, hs, rs)
				}
			}
		}
		wantReaders(cl.holders(t, cl.leader(t), key), h1, h2)

		wch := shAcquireAsync(w, key, "write", shWait)
		shAwaitQueued(t, cl, rec, key)
		if kill {
			_, leader := cl.killLeader(t)
			wantReaders(cl.holders(t, leader, key), h1, h2)
			// Queue positions do not survive the leader: the writer's
			// wait is re-sent to the new one, and readers queue behind it
			// again.
			shAwaitQueued(t, cl, rec, key)
		}
		shStillWaiting(t, wch, 300*time.Millisecond, "the writer, with two readers holding")
		shMust(t, r1.release(rec, h1))
		shStillWaiting(t, wch, 300*time.Millisecond, "the writer, with one reader holding")
		wantReaders(cl.holders(t, cl.leader(t), key), h2)
		shMust(t, r2.release(rec, h2))
		wh := shAwaitGrant(t, wch, 5*time.Second, "the writer, once the readers released")
		for _, h := range rec.all() {
			if h.key == key && h.token >= wh.token {
				t.Fatalf("the writer's token %d is not larger than reader %v's", wh.token, h)
			}
		}
		hs := cl.holders(t, cl.leader(t), key)
		if len(hs) != 1 || hs[0].owner != wh.owner || hs[0].token != wh.token || hs[0].mode != "write" {
			t.Fatalf("FENCE.HOLDERS %s = %+v, want the writer %v alone", key, hs, wh)
		}
		rch := shAcquireAsync(r1, key, "read", shWait)
		shStillWaiting(t, rch, 300*time.Millisecond, "a reader, with the writer holding")
		shMust(t, w.release(rec, wh))
		rh := shAwaitGrant(t, rch, 5*time.Second, "the reader behind the writer")
		if rh.token <= wh.token {
			t.Fatalf("the reader after the writer has token %d, the writer had %d", rh.token, wh.token)
		}
		shMust(t, r1.release(rec, rh))
		if hs := cl.holders(t, cl.leader(t), key); len(hs) != 0 {
			t.Fatalf("FENCE.HOLDERS %s = %+v after every release", key, hs)
		}
	}
	if bad := shCheck(t.Errorf, rec.all(), 0); bad > 0 {
		t.Fatalf("%d violations in %d holds", bad, len(rec.all()))
	}
}

// TestSharedWriterNotStarvedBySixteenReaders: sixteen readers take the
// lock with WAIT, hold it briefly and release it, in a loop; a writer
// queued with WAIT among them gets it within a bound far below their
// stream's length, and holds it alone, round after round, and again
// after the leader is killed while it waits.
func TestSharedWriterNotStarvedBySixteenReaders(t *testing.T) {
	cl := startNodeCluster(t, 3)
	rec := &shRecords{}
	const key = "rw-stream"
	readers := startLoad(t, cl, "reader", 16, func(i int, c *shClient) error {
		h, ok, err := c.acquire(key, "read", 0, shWait)
		if err != nil || !ok {
			return fmt.Errorf("read lock: granted %v, %v", ok, err)
		}
		time.Sleep(time.Duration(5+i) * time.Millisecond)
		return c.release(rec, h)
	})
	readers.awaitProgress(make([]int64, 16), 5, shProgressWithin, nil)
	w := newShClient(t, cl, "writer", 2)
	// writerRound has the writer wait for the lock while the readers
	// stream, killing the leader first if kill, and checks it got the
	// lock within bound and holds it alone.
	writerRound := func(kill bool, bound time.Duration) {
		t.Helper()
		before := readers.counts()
		start := time.Now()
		ch := shAcquireAsync(w, key, "write", shWait)
		if kill {
			time.Sleep(50 * time.Millisecond) // the writer is on its way
			cl.killLeader(t)
		}
		h := shAwaitGrant(t, ch, bound, "the writer among 16 readers")
		took := time.Since(start)
		hs := cl.holders(t, cl.leader(t), key)
		if len(hs) != 1 || hs[0].owner != h.owner || hs[0].mode != "write" {
			t.Fatalf("FENCE.HOLDERS %s = %+v while the writer %v holds", key, hs, h)
		}
		shMust(t, w.release(rec, h))
		t.Logf("the writer waited %v among the readers (kill %v)", took.Round(time.Millisecond), kill)
		// The readers go on after the writer.
		readers.awaitProgress(before, 2, shProgressWithin, nil)
	}
	for range 3 {
		writerRound(false, 5*time.Second)
	}
	writerRound(true, shProgressWithin)
	for range 2 {
		writerRound(false, 5*time.Second)
	}
	readers.finish(shWait + clusterRetryWithin)
	holds := rec.all()
	if bad := shCheck(t.Errorf, holds, 0); bad > 0 {
		t.Fatalf("%d violations in %d holds", bad, len(holds))
	}
	t.Logf("%d holds checked", len(holds))
}

// TestSharedSemaphoreOfThreeUnderTwentyClients: twenty clients take
// permits of a semaphore of 3 with WAIT, hold them briefly and release
// them, in a loop, before and after the leader is killed. Their own
// bookkeeping (a count of holders and an owner per slot, changed between
// the grant and the release) never sees a fourth holder or a slot taken
// twice; neither do FENCE.HOLDERS readings on the leader nor their
// records afterwards; and slots' tokens increase.
func TestSharedSemaphoreOfThreeUnderTwentyClients(t *testing.T) {
	const permits, clients = 3, 20
	cl := startNodeCluster(t, 3)
	rec := &shRecords{}
	const key = "sem"
	var holding, most atomic.Int32
	var slots [permits]atomic.Int32 // the client number + 1, 0 when free
	load := startLoad(t, cl, "sem", clients, func(i int, c *shClient) error {
		h, ok, err := c.acquire(key, "permit", permits, shWait)
		if err != nil || !ok {
			return fmt.Errorf("permit: granted %v, %v", ok, err)
		}
		if h.slot < 0 || h.slot >= permits {
			return fmt.Errorf("granted slot %d of %d permits", h.slot, permits)
		}
		n := holding.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		if n > permits {
			t.Errorf("%s: %d holders of a semaphore of %d at once", c.name, n, permits)
		}
		if !slots[h.slot].CompareAndSwap(0, int32(i+1)) {
			t.Errorf("%s: granted slot %d, which client %d holds", c.name, h.slot, slots[h.slot].Load()-1)
		}
		time.Sleep(time.Duration(2+i%8) * time.Millisecond)
		slots[h.slot].CompareAndSwap(int32(i+1), 0)
		holding.Add(-1)
		return c.release(rec, h)
	})
	poll := pollHolders(t, cl, permits, key)
	load.awaitProgress(make([]int64, clients), 3, shProgressWithin, poll)
	load.runFor(1500*time.Millisecond, poll)
	cl.killLeader(t)
	load.awaitProgress(load.counts(), 3, shProgressWithin, poll)
	load.runFor(1500*time.Millisecond, poll)
	load.finish(shWait + clusterRetryWithin)
	holds := rec.all()
	if bad := shCheck(t.Errorf, holds, permits); bad > 0 {
		t.Fatalf("%d violations in %d holds", bad, len(holds))
	}
	if most.Load() < 2 {
		t.Fatalf("at most %d permits were held at once in %d holds: the clients did not contend", most.Load(), len(holds))
	}
	t.Logf("%d holds checked; at most %d at once", len(holds), most.Load())
}

// TestSharedMultiKeyOppositeOrderNoDeadlock: clients take two keys at once
// with FENCE.MACQUIRE and WAIT, half of them naming them in one order and
// half in the other, and two more take one key each with FENCE.ACQUIRE
// and WAIT, in a loop, before and after the leader is killed. Every wait
// ends in a grant (none starves, none deadlocks), every client finishes
// its last round within a bound, and no two holds of a key overlap.
func TestSharedMultiKeyOppositeOrderNoDeadlock(t *testing.T) {
	cl := startNodeCluster(t, 3)
	rec := &shRecords{}
	orders := [][]string{{"ma", "mb"}, {"mb", "ma"}}
	const multi = 6
	load := startLoad(t, cl, "multi", multi+2, func(i int, c *shClient) error {
		if i >= multi {
			key := orders[0][i-multi]
			h, ok, err := c.acquire(key, "lock", 0, shWait)
			if err != nil || !ok {
				return fmt.Errorf("lock %s: granted %v, %v", key, ok, err)
			}
			time.Sleep(2 * time.Millisecond)
			return c.release(rec, h)
		}
		keys := orders[i%2]
		hs, ok, err := c.acquireAll(keys, shWait)
		if err != nil || !ok {
			return fmt.Errorf("FENCE.MACQUIRE %v: granted %v, %v", keys, ok, err)
		}
		time.Sleep(2 * time.Millisecond)
		return c.release(rec, hs...)
	})
	poll := pollHolders(t, cl, 0, "ma", "mb")
	load.awaitProgress(make([]int64, multi+2), 5, shProgressWithin, poll)
	load.runFor(time.Second, poll)
	cl.killLeader(t)
	load.awaitProgress(load.counts(), 5, shProgressWithin, poll)
	load.runFor(time.Second, poll)
	load.finish(shWait + clusterRetryWithin)
	holds := rec.all()
	if bad := shCheck(t.Errorf, holds, 0); bad > 0 {
		t.Fatalf("%d violations in %d holds", bad, len(holds))
	}
	t.Logf("%d holds checked", len(holds))
}
