//go:build linux

package chaos

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencerlock/fencer/fence"
)

// Clocks that run at different rates (docs/safety.md). Every process of a
// campaign shares the host's monotonic clock, so the clock-rate assumption
// is exercised by a fault instead: fencerd built with -tags fencer_faults
// and FENCER_CLOCK_RATE=f runs its lease clock at f times real time (and
// nothing else: Raft's timers stay real). Only the leader times leases, and
// a new leader restarts every lease at its full TTL, so the node with the
// factor is made leader and kept there, and the clients, on the real clock,
// play the part of clients whose clock runs at rate 1.
//
// The bound. A client sends its request at s; the leader applies the grant
// at a ≥ s and frees the lock once its lease clock has counted the TTL, at
// real time a + TTL/f; the next holder's grant returns later still. The Go
// client counts the lease valid until s + TTL − allowance, with allowance =
// d·TTL + 2 ms (client.WithDrift, d = 0.01 by default). So no lease ends
// inside the client's validity as long as TTL/f ≥ TTL·(1 − d) − 2 ms, for
// every TTL and whatever the latencies when f ≤ 1/(1 − d): 1.0101 for
// d = 0.01. Without the allowance only the latencies of the grant and of
// the next grant protect the client (a few milliseconds), so a fast clock
// shows as early expiry almost at once; a slow one (f < 1) only holds locks
// longer. Beyond the bound the token still protects the data.
const (
	// clientDrift and clientDriftFloor are the Go client's default drift
	// allowance (client.WithDrift): a lease is valid until
	// TTL × (1 − clientDrift) − clientDriftFloor after its request was
	// sent.
	clientDrift      = 0.01
	clientDriftFloor = 2 * time.Millisecond
	// clockFarBeyond: at this factor and above (ten allowances fast), the
	// runs must show early expiry and late writers refused by the store.
	clockFarBeyond = 1.1
	// expiryClients and lateClients are how many clients of the two
	// workloads every node has; the late writers share lateKeys locks.
	expiryClients = 2
	lateClients   = 3
	lateKeys      = 3
	// defaultClockDuration is each factor's run when CHAOS_CLOCK_DURATION
	// is not set: short, so that go test ./integration/chaos/ stays quick.
	defaultClockDuration = 8 * time.Second
)

// defaultClockRates are the factors go test runs: the real clock, one
// inside the bound, two far beyond it, one slow.
var defaultClockRates = []float64{1, 1.01, 1.2, 2, 0.5}

// clientAllowance is the Go client's default drift allowance for ttl.
func clientAllowance(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl)*clientDrift) + clientDriftFloor
}

// clockBound is the largest leader clock factor at which no lease ends
// before a client's validity does, for any TTL (see above).
func clockBound() float64 { return 1 / (1 - clientDrift) }

// TestClockRate runs a 3-node cluster whose leader's lease clock runs at
// each factor in turn under the early-expiry workload and a fenced
// read-modify-write whose clients write late in their validity, and prints
// a table. It asserts: no lease freed before call+TTL when the leader's
// clock is not fast; none before the client's validity (TTL less the
// default allowance) within the bound; early expiries and late writers
// refused by the fenced store far beyond it; no lease ended before
// call+TTL/f (the fault does what it says); and at every factor no fenced
// store or token violation. CHAOS_CLOCK_RATES (e.g. "1 1.005 1.01") and
// CHAOS_CLOCK_DURATION (per factor) make a longer run: make chaos-clock.
func TestClockRate(t *testing.T) {
	requireRoot(t)
	rates, d := envClockRates(t)
	t.Logf("bound: a leader clock up to %.4f× the client's (d = %v: 1/(1−d)); for the TTLs here, with the 2 ms floor, %.4f× (%v) and %.4f× (%v)",
		clockBound(), clientDrift, ttlBound(expiryTTL), expiryTTL, ttlBound(fencedTTL), fencedTTL)
	var rows []*clockRow
	for _, f := range rates {
		row := runClockRate(t, f, d)
		rows = append(rows, row)
		assertClockRow(t, row)
	}
	t.Log("\n" + clockTable(rows, d))
}

// ttlBound is the bound for one TTL, the allowance's 2 ms floor included.
func ttlBound(ttl time.Duration) float64 {
	return 1 / (1 - clientDrift - float64(clientDriftFloor)/float64(ttl))
}

// envClockRates reads CHAOS_CLOCK_RATES and CHAOS_CLOCK_DURATION.
func envClockRates(t *testing.T) ([]float64, time.Duration) {
	t.Helper()
	rates, d := defaultClockRates, defaultClockDuration
	if s := os.Getenv("CHAOS_CLOCK_RATES"); s != "" {
		rates = nil
		for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == ',' }) {
			v, err := strconv.ParseFloat(f, 64)
			if err != nil || !(v > 0) || math.IsInf(v, 0) {
				t.Fatalf("CHAOS_CLOCK_RATES: %q is not a positive factor", f)
			}
			rates = append(rates, v)
		}
	}
	if v, set := envDuration(t, "CHAOS_CLOCK_DURATION"); set {
		d = v
	}
	return rates, d
}

// clockRow is what one factor's run found.
type clockRow struct {
	rate   float64
	grants int
	// Leases freed before call+TTL (raw) and before the client's validity
	// (allow), and the closest a later grant came to either end: negative
	// is the worst early expiry.
	earlyRaw, earlyAllow     int
	closestRaw, closestAllow time.Duration
	// beforeModel counts the leases that ended before call+TTL/f: a leader
	// whose lease clock runs at f ends a lease TTL/f of real time after it
	// applied the grant, never earlier.
	beforeModel int
	// The fenced store: writes acknowledged; writes made after the lock had
	// passed to a newer token, and how many of those the store refused.
	acked, late, lateRefused int
	storeViolations          int
	leaderChanges            int
	// Violations: checkEarlyExpiry's, without and with the allowance, and
	// those of the store, the tokens, the state hashes, the logs and the
	// harness.
	rawViolations, allowViolations []string
	violations                     []string
}

// runClockRate runs one factor: a fresh cluster whose n1 has FENCER_CLOCK_RATE
// and leads, the two workloads for d, then the checks.
func runClockRate(t *testing.T, rate float64, d time.Duration) *clockRow {
	t.Helper()
	factor := strconv.FormatFloat(rate, 'g', -1, 64)
	t.Logf("leader clock factor %s: %v", factor, d)
	dir := runDir(t, "fencer-chaos-clock-"+factor+"-")
	c, err := startCluster(clusterConfig{nodes: 3, bin: faultyBin, dir: dir,
		nodeEnv: [][]string{{"FENCER_CLOCK_RATE=" + factor}}})
	if err != nil {
		t.Fatalf("factor %s: starting the cluster: %v", factor, err)
	}
	t.Cleanup(c.teardown)
	defer c.teardown()
	if err := c.makeLeader(0); err != nil {
		t.Fatalf("factor %s: %v", factor, err)
	}

	row := &clockRow{rate: rate}
	count := &counters{}
	clk := clock{start: time.Now()}
	grants := &grantLog{}
	exp := &expiryWorkload{grants: grants}
	fenced := newFencedWorkload(grants)
	writes := &writeLog{}
	seed := uint64(time.Now().UnixNano())
	clients := newCrowd(c, clk, seed, count)
	for i := range c.nodes {
		for j := range expiryClients + lateClients {
			clients.spawn(i, func(cl *client) {
				if j < expiryClients {
					exp.run(cl, clients.stop)
				} else {
					fenced.runLate(cl, writes, clients.stop)
				}
			})
		}
	}
	time.Sleep(d)
	close(clients.stop)
	clients.wait(t)
	hashes, convergeErr := c.awaitConverged(formTimeout)

	all := grants.all()
	row.grants = len(all)
	none := func(time.Duration) time.Duration { return 0 }
	row.earlyRaw, row.closestRaw = earlyExpiries(all, none)
	row.earlyAllow, row.closestAllow = earlyExpiries(all, clientAllowance)
	// (The millisecond is for rounding, with room to spare.)
	row.beforeModel, _ = earlyExpiries(all, func(ttl time.Duration) time.Duration {
		return ttl - time.Duration(float64(ttl)/rate) + time.Millisecond
	})
	row.rawViolations = checkEarlyExpiry(all).violations
	row.allowViolations = checkEarlyExpiry(shiftEnds(all, clientAllowance)).violations
	row.acked = int(fenced.acked.Load())
	row.late, row.lateRefused = writes.late(all)
	store := fenced.check()
	row.storeViolations = len(store.violations)
	for _, res := range []checkResult{store, checkTokens(all, nil), checkStateHashes(hashes, convergeErr)} {
		for _, v := range res.violations {
			row.violations = append(row.violations, res.name+": "+v)
		}
		if res.undecided != "" {
			row.violations = append(row.violations, res.name+": undecided: "+res.undecided)
		}
	}
	ready := 0
	for _, n := range c.nodes {
		row.violations = append(row.violations, n.badLogLines()...)
		row.violations = append(row.violations, n.unexpectedExits()...)
		ready += n.countInLogs("leader ready")
	}
	row.leaderChanges = ready - 1 // n1's own election
	if l := c.leader(); l != 0 {
		t.Logf("factor %s: n1 no longer leads at the end (leader index %d): part of the run was timed on a real clock", factor, l)
	}
	if n := count.unexpected.Load(); n > 0 {
		row.violations = append(row.violations, fmt.Sprintf("%d replies did not fit their command; the first: %v", n, count.sample.Load()))
	}
	if count.okOps.Load() == 0 {
		row.violations = append(row.violations, "no operation succeeded")
	}
	return row
}

// makeLeader hands leadership to node i unless it already leads.
func (c *cluster) makeLeader(i int) error {
	l, err := c.awaitLeader(formTimeout)
	if err != nil {
		return err
	}
	if l != i {
		if v, err := c.call(l, adminTimeout, "FENCE.TRANSFER", c.nodes[i].id); err != nil || v != "OK" {
			return fmt.Errorf("FENCE.TRANSFER %s answered %v %v", c.nodes[i].id, v, err)
		}
	}
	deadline := time.Now().Add(formTimeout)
	for c.leader() != i {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s does not lead within %v", c.nodes[i].id, formTimeout)
		}
		time.Sleep(pollEvery)
	}
	return nil
}

// assertClockRow fails the test for what the factor must not show, or
// must.
func assertClockRow(t *testing.T, r *clockRow) {
	t.Helper()
	f := r.rate
	for _, v := range r.violations {
		t.Errorf("factor %v: %s", f, v)
	}
	if f <= 1 {
		for _, v := range first(r.rawViolations, 5) {
			t.Errorf("factor %v: freed before call+TTL by a leader whose clock is not fast: %s", f, v)
		}
	}
	if f <= clockBound() {
		for _, v := range first(r.allowViolations, 5) {
			t.Errorf("factor %v, within the bound %.4f: freed inside the client's validity: %s", f, clockBound(), v)
		}
	}
	if r.leaderChanges == 0 && r.beforeModel > 0 {
		t.Errorf("factor %v: %d leases ended before call+TTL/f, earlier than a lease clock at this rate can end them", f, r.beforeModel)
	}
	if f >= clockFarBeyond {
		if r.earlyAllow == 0 {
			t.Errorf("factor %v, far beyond the bound: no lease ended inside the client's validity; the workload cannot see clock rates", f)
		}
		if r.late == 0 || r.lateRefused == 0 {
			t.Errorf("factor %v, far beyond the bound: %d late writes, %d refused by the token; want some of each", f, r.late, r.lateRefused)
		}
	}
}

// first returns at most n of vs.
func first(vs []string, n int) []string { return vs[:min(n, len(vs))] }

// earlyExpiries judges grants by checkEarlyExpiry's rule, with every
// lease's end moved allow(ttl) earlier: how many leases a later grant of
// another owner came before, and the closest any such grant came to the
// end (negative: the worst early expiry).
func earlyExpiries(grants []grant, allow func(time.Duration) time.Duration) (early int, closest time.Duration) {
	byKey := make(map[string][]grant)
	for _, g := range grants {
		byKey[g.key] = append(byKey[g.key], g)
	}
	closest = math.MaxInt64
	for _, gs := range byKey {
		sort.Slice(gs, func(i, j int) bool { return gs[i].token < gs[j].token })
		for i, a := range gs {
			end := a.validUntil - int64(allow(a.ttl))
			freed := false
			for _, b := range gs[i+1:] {
				if a.token == b.token || a.owner == b.owner || a.released <= b.ret {
					continue
				}
				m := time.Duration(b.ret - end)
				closest = min(closest, m)
				freed = freed || m < 0
			}
			if freed {
				early++
			}
		}
	}
	return early, closest
}

// shiftEnds returns grants with every lease's end moved allow(ttl) earlier.
func shiftEnds(grants []grant, allow func(time.Duration) time.Duration) []grant {
	out := slices.Clone(grants)
	for i := range out {
		out[i].validUntil -= int64(allow(out[i].ttl))
	}
	return out
}

// writeLog is every write the late writers made to the fenced store.
type writeLog struct {
	mu     sync.Mutex
	writes []lateWrite
}

// lateWrite is one write attempt: when, under which token, and whether the
// store refused it as stale.
type lateWrite struct {
	key     string
	token   uint64
	at      int64
	refused bool
}

func (l *writeLog) add(w lateWrite) {
	l.mu.Lock()
	l.writes = append(l.writes, w)
	l.mu.Unlock()
}

// late counts the writes made after a grant of their key with a larger
// token had returned (the lock had passed on while the writer still
// counted its lease valid), and how many of them the store refused.
func (l *writeLog) late(grants []grant) (late, refused int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, w := range l.writes {
		if slices.ContainsFunc(grants, func(g grant) bool { return g.key == w.key && g.token > w.token && g.ret < w.at }) {
			late++
			if w.refused {
				refused++
			}
		}
	}
	return late, refused
}

// runLate is a fenced read-modify-write by a client that trusts its
// lease's validity as the Go client counts it (from the request, the TTL
// less the default allowance): it takes the lock, reads the register at
// once, works until a random point in the last quarter of its validity,
// and writes only if, by its own clock, the validity has not run out. A
// leader whose clock runs fast may have passed the lock on by then; the
// store must refuse the late write once the next holder used its token.
// The clients poll for the lock instead of queuing with WAIT: a grant
// after a wait in the queue has spent part of its validity, counted from
// the request, before it arrives, and could not be late; a poller is
// granted at once, and the next poller takes the lock within milliseconds
// of its expiry, as a waiter would.
func (w *fencedWorkload) runLate(cl *client, writes *writeLog, stop <-chan struct{}) {
	validity := int64(fencedTTL - clientAllowance(fencedTTL))
	for !stopped(stop) {
		key := fmt.Sprintf("reg-%d", cl.rng.IntN(lateKeys))
		owner := cl.owner()
		if g, granted := cl.acquire("fenced-late", key, owner, fencedTTL, clientTimeout); granted {
			work := int64(float64(validity) * (0.75 + 0.24*cl.rng.Float64()))
			w.writeBy(cl, writes, key, owner, g.token, g.call+work, g.call+validity)
			releaseUntilKnown(cl, key, owner, &g)
			w.grants.add(g)
		}
		cl.think()
	}
}

// writeBy reads the register under tok, waits until at, and appends owner
// to it if the lease is still valid by the client's clock (before until).
func (w *fencedWorkload) writeBy(cl *client, writes *writeLog, key, owner string, tok uint64, at, until int64) {
	list, err := w.store.read(key, tok)
	if err != nil {
		w.countStale(err)
		return
	}
	time.Sleep(time.Duration(at - cl.clk.now()))
	now := cl.clk.now()
	if now >= until {
		return // the client knows its lease ended: it does not write
	}
	err = w.store.write(key, tok, owner, append(list, owner))
	var stale *fence.StaleTokenError
	writes.add(lateWrite{key: key, token: tok, at: now, refused: errors.As(err, &stale)})
	if err != nil {
		w.countStale(err)
		return
	}
	w.ack(key, owner, tok)
}

// clockTable renders the rows as a markdown table.
func clockTable(rows []*clockRow, d time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Leader clock factor f on n1 of 3 nodes, %v per factor; TTLs %v (early-expiry workload) and %v (fenced); client allowance %v and %v (TTL × %v + %v). "+
		"closest: how near a later grant of another owner came to the end of the lease before it, in ms; negative is the worst early expiry.\n\n",
		d, expiryTTL, fencedTTL, clientAllowance(expiryTTL), clientAllowance(fencedTTL), clientDrift, clientDriftFloor)
	b.WriteString("| f | grants | freed before call+TTL | closest (ms) | freed before call+TTL−allowance | closest (ms) | fenced writes acknowledged | late writes (refused by token) | store violations | leader changes |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	msStr := func(d time.Duration) string {
		if d == math.MaxInt64 {
			return "–"
		}
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64)
	}
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %d | %d | %s | %d | %s | %d | %d (%d) | %d | %d |\n",
			strconv.FormatFloat(r.rate, 'g', -1, 64), r.grants, r.earlyRaw, msStr(r.closestRaw), r.earlyAllow, msStr(r.closestAllow),
			r.acked, r.late, r.lateRefused, r.storeViolations, r.leaderChanges)
	}
	return b.String()
}
