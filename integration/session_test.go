package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fencerlock/fencer/client"
)

// Sessions with real fencerd processes (issue 19, "Must show"): two hundred
// locks held under one session cost one keepalive a period; the end of the
// session (its client killed) frees them all in one entry after the TTL,
// and hands them to their waiters there; a leader failover in between
// changes none of that.

const (
	// scLocks is how many locks a session holds in these tests.
	scLocks = 200
	// scWaitersQueued is how many of them have a waiter queued when the
	// session's client is killed.
	scWaitersQueued = 20
	// scTTL is the session TTL where no leader changes: keepalives every
	// TTL/3.
	scTTL = 1500 * time.Millisecond
	// scFailoverTTL is the session TTL across a leader's death: the
	// client's own count of the session's validity (from the last
	// keepalive it sent, up to TTL/3 before the kill) must outlast an
	// election, which takes one to three seconds.
	scFailoverTTL = 6 * time.Second
	// scHoldFor is how long the locks are held while keepalives are
	// counted.
	scHoldFor = 6 * time.Second
)

func scKeys(prefix string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s%03d", prefix, i)
	}
	return keys
}

// checkHeld fails the test unless st shows every lock held by its owner
// with its token, and the session listing all of them.
func (st scState) checkHeld(t *testing.T, locks []scLock, when string) {
	t.Helper()
	for i, l := range locks {
		if !st.held[i] || st.owner[i] != l.owner || st.token[i] != l.token {
			t.Fatalf("%s: %s is held=%v by %q with token %d; want %q with token %d", when, l.key, st.held[i], st.owner[i], st.token[i], l.owner, l.token)
		}
	}
	if st.sessionLocks != len(locks) {
		t.Fatalf("%s: FENCE.SESSION INFO lists %d locks, want %d (-1: the session is not open)", when, st.sessionLocks, len(locks))
	}
}

// TestSessionHoldsTwoHundredLocksWithOneKeepalive: 200 locks under one
// session stay held for several TTLs while the client sends one keepalive
// about every TTL/3 and nothing else: no extend reaches the server, and
// every lock keeps its token. Closing the session frees them all at once.
func TestSessionHoldsTwoHundredLocksWithOneKeepalive(t *testing.T) {
	d := newDaemons(t, 1)[0]
	httpAddr := scWithHTTP(t, d)
	d.start(t)
	fencingWaitLeader(t, d)

	var sent clCounter
	c := clNew(t, []string{d.addr}, sent.dialer())
	s, err := c.NewSession(clCtx(t, requestTimeout), client.WithSessionTTL(scTTL))
	if err != nil {
		t.Fatal(err)
	}
	keys := scKeys("held", scLocks)
	locks := make([]scLock, len(keys))
	var wg sync.WaitGroup
	errs := make(chan error, len(keys))
	for i, k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := c.TryAcquire(clCtx(t, requestTimeout), k, client.WithSession(s))
			if err != nil {
				errs <- err
				return
			}
			locks[i] = scLock{key: k, owner: l.Owner(), token: int64(l.Token())}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("acquiring under the session: %v", err)
	}
	rd := scNewReader(t, d.addr, fmt.Sprint(s.ID()), keys)
	rd.read(t).checkHeld(t, locks, "after the acquires")

	keepBefore, extBefore := scMetric(t, httpAddr, scKeepalives), scMetric(t, httpAddr, scExtends)
	cmdsBefore := sent.commands.Load()
	start := time.Now()
	select {
	case <-s.Done():
		t.Fatalf("the session ended %v into the hold: %v", time.Since(start), s.Err())
	case <-time.After(scHoldFor):
	}
	// The counters are read at both ends, so the span is at least the
	// hold and at most what the reads took on top.
	keeps := scMetric(t, httpAddr, scKeepalives) - keepBefore
	exts := scMetric(t, httpAddr, scExtends) - extBefore
	cmds := sent.commands.Load() - cmdsBefore
	span := time.Since(start)
	t.Logf("over %v: %v keepalives served, %v extends, %d commands sent by the client", span.Round(time.Millisecond), keeps, exts, cmds)

	low := float64(scHoldFor / scTTL)            // one a TTL would just keep it
	high := 2 * float64(span) / float64(scTTL/3) // twice the expected rate
	if keeps < low || keeps > high {
		t.Errorf("%v keepalives in %v with TTL %v; want between %v and %.1f (about one every TTL/3)", keeps, span, scTTL, low, high)
	}
	if exts != 0 {
		t.Errorf("%v extends served while the locks were held under a session; want 0", exts)
	}
	// Everything the client sent during the hold was a keepalive (one may
	// have been in flight at either end of the span).
	if d := float64(cmds) - keeps; d < -1 || d > 1 {
		t.Errorf("the client sent %d commands during the hold, %v keepalives were served: it sent something else", cmds, keeps)
	}
	if s.Err() != nil {
		t.Fatalf("the session ended: %v", s.Err())
	}
	rd.read(t).checkHeld(t, locks, fmt.Sprintf("after %v", span.Round(time.Millisecond)))

	if err := s.Close(clCtx(t, requestTimeout)); err != nil {
		t.Fatalf("Close: %v", err)
	}
	st := rd.read(t)
	for i, k := range keys {
		if st.held[i] {
			t.Errorf("%s is still held (token %d) after the session was closed", k, st.token[i])
		}
	}
	if st.sessionLocks != -1 {
		t.Errorf("FENCE.SESSION INFO lists %d locks after the close; want null", st.sessionLocks)
	}
}

// TestSessionEndFreesAllLocksAtOnceToWaiters: the session's client (a
// separate process holding 200 locks under it) is killed with SIGKILL.
// No lock is freed before the TTL could have run out; all are freed in one
// entry within twice the TTL, and the queued waiters are granted there:
// with one token, the entry's position, above every token the session
// held.
func TestSessionEndFreesAllLocksAtOnceToWaiters(t *testing.T) {
	d := newDaemons(t, 1)[0]
	httpAddr := scWithHTTP(t, d)
	d.start(t)
	fencingWaitLeader(t, d)

	child, session, locks := scHold(t, []string{d.addr}, scTTL, scLocks, "end")
	scKillAndWatch(t, d.addr, httpAddr, child, session, locks, scTTL)
}

// TestSessionSurvivesLeaderFailover: the same on three nodes, with the
// leader killed (SIGKILL) while the session holds its 200 locks. The
// session's client keeps it alive through the new leader, which restarts
// its TTL in full: it is still open, with every lock and token, after the
// new leader has served keepalives spanning a whole TTL. Then the client
// is killed, and the new leader frees the locks at once, not before the
// TTL, to their waiters.
func TestSessionSurvivesLeaderFailover(t *testing.T) {
	httpOf := make(map[string]string)
	cl := startNodeClusterWith(t, 3, func(d *daemon) { httpOf[d.addr] = scWithHTTP(t, d) })
	old := cl.leader(t)
	var addrs []string
	for _, d := range cl.nodes {
		addrs = append(addrs, d.addr)
	}
	child, session, locks := scHold(t, addrs, scFailoverTTL, scLocks, "failover")
	keys := make([]string, len(locks))
	for i, l := range locks {
		keys[i] = l.key
	}
	scNewReader(t, cl.nodes[old].addr, session, keys).read(t).checkHeld(t, locks, "on the first leader")

	killed := time.Now()
	cl.nodes[old].kill9(t)
	cl.awaitNewLeader(t, cl.others(old), cl.ids[old], killed, clusterElectionTimeout)
	now := cl.agreedLeader(t, cl.others(old), clusterElectionTimeout)
	t.Logf("node %d killed; node %d leads after %v", old+1, now+1, time.Since(killed).Round(time.Millisecond))
	// Four keepalives served alive by the new leader, about TTL/3 apart,
	// span a TTL: the session outlived the full TTL the new leader gave
	// it on taking over only because its client kept it alive.
	scAwaitMetric(t, httpOf[cl.nodes[now].addr], scKeepalives, 4, 3*scFailoverTTL)
	if ended := child.printed("ended"); len(ended) > 0 {
		t.Fatalf("the holder's session ended across the failover: %s", ended[0].text)
	}
	scNewReader(t, cl.nodes[now].addr, session, keys).read(t).checkHeld(t, locks, "on the new leader")

	scKillAndWatch(t, cl.nodes[now].addr, httpOf[cl.nodes[now].addr], child, session, locks, scFailoverTTL)
}

// scKillAndWatch queues a waiter on each of the first scWaitersQueued of
// locks through the leader at addr (whose /metrics is at httpAddr), kills
// child, the process that holds locks under session with ttl, and reads
// every lock until all are freed. It fails the test unless none was freed
// before the TTL could have run out, all were freed within twice the TTL
// and a second, in one entry, and each waiter was granted its lock in that
// entry: each hand-off has a token of its own, and they are consecutive.
func scKillAndWatch(t *testing.T, addr, httpAddr string, child *scChild, session string, locks []scLock, ttl time.Duration) {
	t.Helper()
	keys := make([]string, len(locks))
	var maxOld int64
	for i, l := range locks {
		keys[i] = l.key
		maxOld = max(maxOld, l.token)
	}
	rd := scNewReader(t, addr, session, keys)
	rd.read(t).checkHeld(t, locks, "before the waiters queued")

	type won struct {
		i     int
		lease *client.Lease
		err   error
	}
	wc := clNew(t, []string{addr})
	won1 := make(chan won, scWaitersQueued)
	queued := scMetric(t, httpAddr, scWaiters)
	ctx, cancel := context.WithTimeout(context.Background(), clusterReadyTimeout+2*ttl)
	defer cancel()
	for i := range scWaitersQueued {
		go func() {
			l, err := wc.Acquire(ctx, keys[i], client.WithTTL(time.Minute))
			won1 <- won{i, l, err}
		}()
	}
	scAwaitMetric(t, httpAddr, scWaiters, queued+scWaitersQueued, clusterReadyTimeout)

	killed := child.kill9(t)
	deadline := killed.Add(2*ttl + time.Second)
	var rounds []scState
	first := make([]int, len(keys)) // the first read that saw the lock freed
	for i := range first {
		first[i] = -1
	}
	for freed := 0; freed < len(keys); {
		st := rd.read(t)
		rounds = append(rounds, st)
		r := len(rounds) - 1
		if st.sessionLocks != -1 && st.sessionLocks != len(locks) {
			t.Errorf("%v after the kill, FENCE.SESSION INFO lists %d of the session's %d locks: they must go at once",
				st.start.Sub(killed), st.sessionLocks, len(locks))
		}
		for i, l := range locks {
			if first[i] < 0 && !(st.held[i] && st.owner[i] == l.owner && st.token[i] == l.token) {
				first[i] = r
				freed++
			}
		}
		if freed < len(keys) && st.start.After(deadline) {
			t.Fatalf("%d of %d locks still held %v after the holder was killed (TTL %v)", len(keys)-freed, len(keys), st.start.Sub(killed), ttl)
		}
		time.Sleep(2 * scPoll)
	}
	lo, hi := first[0], first[0]
	for _, r := range first {
		lo, hi = min(lo, r), max(hi, r)
	}
	// A lock seen freed in read r was freed before that read ended.
	earliest := rounds[lo].end.Sub(killed)
	t.Logf("locks seen freed between %v and %v after the kill (reads %d to %d of %d)",
		rounds[lo].start.Sub(killed).Round(time.Millisecond), rounds[hi].end.Sub(killed).Round(time.Millisecond), lo, hi, len(rounds))
	// The last keepalive may have been sent up to TTL/3 before the kill.
	if earliest < ttl/2 {
		t.Errorf("a lock was freed within %v of the kill; the session's TTL is %v", earliest, ttl)
	}
	// One entry frees them all: a read that began before it and ended
	// after it sees some freed, the next sees all.
	if hi-lo > 1 {
		t.Errorf("the locks were freed over reads %d to %d (%v), not at once", lo, hi, rounds[hi].end.Sub(rounds[lo].start))
	}

	granted := make([]uint64, len(keys))
	var lowest, highest uint64
	for range scWaitersQueued {
		var w won
		select {
		case w = <-won1:
		case <-time.After(requestTimeout):
			t.Fatalf("a waiter was not answered within %v of the locks' release", requestTimeout)
		}
		if w.err != nil {
			t.Fatalf("waiter on %s: %v", keys[w.i], w.err)
		}
		tok := w.lease.Token()
		granted[w.i] = tok
		if lowest == 0 || tok < lowest {
			lowest = tok
		}
		highest = max(highest, tok)
		if int64(tok) <= maxOld {
			t.Errorf("waiter on %s was granted token %d, not above the session's largest %d", keys[w.i], tok, maxOld)
		}
	}
	// One entry's hand-offs take consecutive positions, one each, in key
	// order: nothing else can come between them.
	if highest-lowest != scWaitersQueued-1 {
		t.Errorf("the waiters' tokens span %d..%d, not %d consecutive positions: the hand-offs were not in one entry", lowest, highest, scWaitersQueued)
	}
	last := rd.read(t)
	for i, k := range keys {
		switch {
		case i < scWaitersQueued && (!last.held[i] || uint64(last.token[i]) != granted[i]):
			t.Errorf("%s: held=%v with token %d; want its waiter's grant, token %d", k, last.held[i], last.token[i], granted[i])
		case i >= scWaitersQueued && last.held[i]:
			t.Errorf("%s, with no waiter, is held by %q (token %d) after the session ended", k, last.owner[i], last.token[i])
		}
	}
	if last.sessionLocks != -1 {
		t.Errorf("FENCE.SESSION INFO lists %d locks after the session ended; want null", last.sessionLocks)
	}
	t.Logf("%d waiters granted tokens %d..%d (the session's locks had tokens up to %d)", scWaitersQueued, lowest, highest, maxOld)
}
