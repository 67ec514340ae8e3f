//go:build linux

package chaos

import (
	"context"
	"fmt"
	"math"
	"net"
	"time"

	fencer "github.com/fencerlock/fencer/client"
)

// The soak's two workloads beside the campaign's: leases of the Go client
// with auto-renew, and a set of held locks that grows and shrinks slowly.

// Leases of the Go client (client.Lease): each worker has a client.Client
// over every node, takes a lease on one of two contended keys (Acquire
// waits in the server's queue), renews it in the background while it does a
// fenced read-modify-write and holds it for a while, then releases it.
// Leases are lost now and then to a fault (their TTL is short); the grants
// join the campaign's checkers and the writes its fenced store.
const (
	leaseTTL  = 2 * time.Second
	leaseKeys = 2
	// leaseHoldMax is the longest a lease is held: several renewals.
	leaseHoldMax = 6 * time.Second
	// leaseAcquireWithin bounds one Acquire, queueing included.
	leaseAcquireWithin = 10 * time.Second
)

// leaseWorkload is the Go client's workload.
type leaseWorkload struct {
	grants *grantLog
	fenced *fencedWorkload
}

func (w *leaseWorkload) run(cl *client, c *cluster, stop <-chan struct{}) {
	var addrs []string
	for _, n := range c.nodes {
		addrs = append(addrs, n.addr())
	}
	lc, err := fencer.New(addrs, fencer.WithDialer(func(_ context.Context, _, addr string) (net.Conn, error) {
		return c.nw.dial(addr, time.Second)
	}))
	if err != nil {
		cl.count.odd("client.New", err)
		return
	}
	defer lc.Close()
	for !stopped(stop) {
		key := fmt.Sprintf("lease-%d", cl.rng.IntN(leaseKeys))
		ctx, cancel := context.WithTimeout(context.Background(), leaseAcquireWithin)
		call := cl.clk.now()
		l, err := lc.Acquire(ctx, key, fencer.WithTTL(leaseTTL), fencer.WithAutoRenew())
		ret := cl.clk.now()
		cancel()
		if !cl.count.tally(err) {
			// Not granted within leaseAcquireWithin, or no leader: the
			// client cleans up after an acquire whose outcome it lost.
			cl.think()
			continue
		}
		g := grant{workload: "go-client", key: key, owner: l.Owner(), token: l.Token(), ttl: leaseTTL, call: call, ret: ret}
		w.fenced.readModifyWrite(cl, key, l.Owner(), l.Token())
		select {
		case <-time.After(time.Duration(cl.rng.Int64N(int64(leaseHoldMax)))):
		case <-l.Done():
		case <-stop:
		}
		// The lease's validity as the client counts it ends no later than
		// the server's (it is measured from before each request that
		// renewed it, less a drift allowance).
		g.validUntil = int64(l.Until().Sub(cl.clk.start))
		g.released = cl.clk.now()
		rctx, rcancel := context.WithTimeout(context.Background(), clientTimeout)
		_ = l.Release(rctx) // lost leases answer ErrLeaseLost; nothing to check
		rcancel()
		w.grants.add(g)
		cl.think()
	}
}

// The lock set: one client holds many distinct locks with a long TTL, their
// number following a triangle wave between 0 and lockSet.peak, so that the
// table, the snapshots and the expiry heap grow and shrink slowly. It adds
// a key (a fresh name each time) when it holds fewer than the wave asks
// and releases its oldest when it holds more; in between it turns one key
// over (releases the oldest, adds one) every lockSetTurnEvery, so that
// releases of distinct keys fill the release memory to its bound, which
// the campaign's workloads, on a few keys each, hardly do. Nothing else touches these
// keys, so every acquire must be granted and every held key must stay held
// by its owner until released: the workload checks that with spot reads as
// it goes, with the reply to each release, and once more for every key it
// still holds at the end (invariant 1: an acknowledged grant is never
// lost).
const (
	lockSetPeak      = 3000
	lockSetShortPeak = 500 // for runs too short to climb to lockSetPeak
	// lockSetSpotEvery is the pause between two spot reads.
	lockSetSpotEvery = 2 * time.Second
	lockSetTurnEvery = 100 * time.Millisecond
)

// lockSet is the lock-set workload. Its fields are used by its one
// goroutine, and by check once that goroutine has ended.
type lockSet struct {
	grants *grantLog
	peak   int
	period time.Duration
	ttl    time.Duration

	seq        int
	held       []grant // oldest first
	most       int     // the most held at once
	reads      int     // spot reads and final reads that were answered
	violations []string
}

// target is how many keys the wave asks for at elapsed: 0 at the start of
// each period, peak in its middle.
func (s *lockSet) target(elapsed time.Duration) int {
	phase := float64(elapsed%s.period) / float64(s.period)
	f := 2 * phase
	if phase > 0.5 {
		f = 2 - 2*phase
	}
	return int(math.Round(f * float64(s.peak)))
}

// lockSetPeriod returns the wave's period for a run: about 20 minutes, and
// the second half of the run a whole number of periods that begins at a
// trough, so that the wave alone adds no slope to the growth check's fit.
func lockSetPeriod(d time.Duration) time.Duration {
	k := max(1, math.Round(float64(d/2)/float64(20*time.Minute)))
	return time.Duration(float64(d/2) / k)
}

// dialAnyUp makes cl reconnect to the nodes that are up in turn, so that
// the lock set goes on through faults.
func dialAnyUp(cl *client, c *cluster) {
	next := 0
	cl.conn.dial = func() (net.Conn, error) {
		up := c.up()
		if len(up) == 0 {
			up = c.all()
		}
		next++
		return c.nw.dial(c.nodes[up[next%len(up)]].addr(), time.Second)
	}
}

func (s *lockSet) run(cl *client, stop <-chan struct{}) {
	nextSpot, nextTurn := time.Now().Add(lockSetSpotEvery), time.Now()
	for !stopped(stop) {
		switch want := s.target(time.Duration(cl.clk.now())); {
		case len(s.held) < want:
			s.add(cl)
		case len(s.held) > want || len(s.held) > 0 && time.Now().After(nextTurn):
			s.release(cl, s.held[0])
			s.held = s.held[1:]
			nextTurn = time.Now().Add(lockSetTurnEvery)
		default:
			time.Sleep(10 * time.Millisecond)
		}
		if len(s.held) > 0 && time.Now().After(nextSpot) {
			s.read(cl, s.held[cl.rng.IntN(len(s.held))])
			nextSpot = time.Now().Add(lockSetSpotEvery)
		}
	}
}

// add acquires a fresh key.
func (s *lockSet) add(cl *client) {
	s.seq++
	key, owner := fmt.Sprintf("set-%d", s.seq), cl.owner()
	v, out, call, ret := cl.do(clientTimeout, "FENCE.ACQUIRE", key, owner, ms(s.ttl))
	switch out {
	case unknown:
		releaseUntilKnown(cl, key, owner, nil)
	case ok:
		tok, granted, err := asGrant(v)
		switch {
		case err != nil:
			cl.count.odd("FENCE.ACQUIRE", v)
		case !granted:
			s.violations = append(s.violations, fmt.Sprintf("%s: refused to %s, but no one else ever asked for it", key, owner))
		default:
			s.held = append(s.held, grant{workload: "lock-set", key: key, owner: owner, token: tok, ttl: s.ttl,
				call: call, ret: ret, validUntil: call + int64(s.ttl)})
			s.most = max(s.most, len(s.held))
		}
	}
}

// release releases a held key until the outcome is known: the first
// answer must be 1, unless an earlier attempt may have released it already
// (a repeated release is remembered, but the soak's release memory is
// small). It gives up after 30 s.
func (s *lockSet) release(cl *client, g grant) {
	deadline := time.Now().Add(30 * time.Second)
	maybeDone := false
	for time.Now().Before(deadline) {
		v, out, call, _ := cl.do(clientTimeout, "FENCE.RELEASE", g.key, g.owner)
		if g.released == 0 && out != failed {
			g.released = call
		}
		switch out {
		case ok:
			n, isInt := v.(int64)
			switch {
			case !isInt:
				cl.count.odd("FENCE.RELEASE", v)
			case n == 0 && !maybeDone:
				s.violations = append(s.violations, fmt.Sprintf("%s: %s released its grant (token %d) and was told it did not hold it",
					g.key, g.owner, g.token))
			}
			s.grants.add(g)
			return
		case unknown:
			maybeDone = true
		}
		time.Sleep(200 * time.Millisecond)
	}
	s.grants.add(g)
}

// read checks with FENCE.STATUS that g is still held by its owner with its
// token. An error reply or a lost connection says nothing either way.
func (s *lockSet) read(cl *client, g grant) {
	r, read := cl.status(g.key)
	if !read {
		return
	}
	s.reads++
	if !r.held || r.owner != g.owner || r.token != g.token {
		s.violations = append(s.violations, fmt.Sprintf("%s: granted to %s with token %d at +%v and never released, but FENCE.STATUS answers %v",
			g.key, g.owner, g.token, time.Duration(g.ret).Round(time.Millisecond), r.reply))
	}
}

// check reads every key still held (the cluster is whole again) and
// returns what the workload found; the grants go to the shared log.
func (s *lockSet) check(cl *client) checkResult {
	for _, g := range s.held {
		for range 5 {
			before := s.reads
			s.read(cl, g)
			if s.reads > before {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		s.grants.add(g)
	}
	res := checkResult{name: "lock set: acknowledged grants kept", checked: s.seq, violations: s.violations}
	res.notes = append(res.notes, fmt.Sprintf("up to %d held at once (wave 0-%d, period %v), %d still held at the end, %d reads",
		s.most, s.peak, s.period.Round(time.Second), len(s.held), s.reads))
	return res
}
