//go:build linux

package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	fencer "github.com/fencerlock/fencer/client"
	"github.com/fencerlock/fencer/fence"
	"github.com/redis/go-redis/v9"
)

// Workload wlElection: campaigners on one election through the Go client
// (client.Election), each under a session of its own with a short TTL.
// A campaigner loops: Campaign; while it leads, it writes (epoch, value)
// to a store that fence.Memory guards, now and then Proclaims a new value
// and reads Leader(); then it Resigns, or closes its session, or abandons
// it: its client is closed without a word to the server, so keepalives
// stop, and it goes on writing with its old epoch for a while, as a leader
// that was paused and has not noticed that it was deposed. A leader whose
// term ends under it (the session lost to a fault) writes once more too.
// Every campaigner reads Leader() before each Campaign and while it leads.
//
// Checkers: at most one leader per epoch (no two Campaigns return the same
// epoch); epochs never go back (a Campaign that began after another
// returned has a larger epoch, and the store accepted writes in epoch
// order, each epoch's writes from the campaigner elected with it); a write
// with an epoch lower than one the store accepted is refused; and
// Leader() never returns an epoch lower than one that a Campaign had
// returned before the read began, with a value its leader announced. The
// terms join the shared grant log (key: the election's name, token: the
// epoch), so the early-expiry and token checkers cover them too.
const (
	electionName = "election-0"
	electionTTL  = 1500 * time.Millisecond
	// campaignWithin bounds one Campaign, queueing included.
	campaignWithin = 10 * time.Second
	// termMax is the longest a campaigner leads before it steps down.
	termMax = 1500 * time.Millisecond
	// leaderWriteEvery is the pause between a leader's writes.
	leaderWriteEvery = 100 * time.Millisecond
)

// epochStore is the fenced store the leaders write to: the latest (epoch,
// value) and every write it accepted, in order.
type epochStore struct {
	validator *fence.Memory
	mu        sync.Mutex
	highest   uint64 // the highest epoch accepted, kept apart from validator's
	accepted  []epochWrite
	// stale are the writes accepted with an epoch below highest: what
	// the validator must never let through.
	stale []epochWrite
}

// epochWrite is one write the store accepted.
type epochWrite struct {
	epoch       uint64
	term, value string
}

// write stores value under epoch for term if the validator admits epoch.
func (s *epochStore) write(epoch uint64, term, value string) error {
	return s.validator.Admit(context.Background(), electionName, epoch, func(context.Context) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		w := epochWrite{epoch: epoch, term: term, value: value}
		if epoch < s.highest {
			s.stale = append(s.stale, w)
		}
		s.highest = max(s.highest, epoch)
		s.accepted = append(s.accepted, w)
		return nil
	})
}

// electionTerm is one Campaign that returned an epoch.
type electionTerm struct {
	id        string
	client    string
	epoch     uint64
	session   uint64
	call, ret int64
	// values are every value the term announced, Campaign's first; a
	// Proclaim's is added before it is sent (it may take effect unseen).
	values []string
}

// leaderRead is one Leader() that was answered.
type leaderRead struct {
	client    string
	call, ret int64
	none      bool // no leader
	epoch     uint64
	value     string
}

// electionWorkload is workload wlElection.
type electionWorkload struct {
	grants *grantLog
	store  *epochStore

	mu    sync.Mutex
	terms []*electionTerm
	reads []leaderRead

	writes, proclaims, resigns, closes, abandons, lost, lateWrites, lateRefused atomic.Int64
}

func newElectionWorkload(grants *grantLog) *electionWorkload {
	return &electionWorkload{grants: grants, store: &epochStore{validator: fence.NewMemory()}}
}

// quietRedis silences go-redis's log, once: the Go client's pools log
// every failed dial, which under the nemesis is hundreds of lines that say
// nothing the counters do not.
var quietRedis sync.Once

// discardLog is a go-redis logger that drops every line.
type discardLog struct{}

func (discardLog) Printf(context.Context, string, ...any) {}

func (w *electionWorkload) run(cl *client, c *cluster, stop <-chan struct{}) {
	quietRedis.Do(func() { redis.SetLogger(discardLog{}) })
	var addrs []string
	for _, n := range c.nodes {
		addrs = append(addrs, n.addr())
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	for !stopped(stop) {
		lc, err := fencer.New(addrs, fencer.WithDialer(func(_ context.Context, _, addr string) (net.Conn, error) {
			return c.nw.dial(addr, time.Second)
		}))
		if err != nil {
			cl.count.odd("client.New", err)
			return
		}
		w.campaignUnder(ctx, cl, lc, stop)
		_ = lc.Close()
		cl.think()
	}
}

// campaignUnder opens a session on lc and campaigns under it until the
// session ends, is closed or is abandoned.
func (w *electionWorkload) campaignUnder(ctx context.Context, cl *client, lc *fencer.Client, stop <-chan struct{}) {
	octx, ocancel := context.WithTimeout(ctx, clientTimeout)
	s, err := lc.NewSession(octx, fencer.WithSessionTTL(electionTTL))
	ocancel()
	if !cl.count.tally(err) {
		return
	}
	e := lc.NewElection(s, electionName)
	for !stopped(stop) && s.Err() == nil {
		w.readLeader(ctx, cl, e)
		t := &electionTerm{id: cl.owner(), client: cl.name, session: s.ID()}
		t.values = []string{t.id + "/0"}
		cctx, ccancel := context.WithTimeout(ctx, campaignWithin)
		t.call = cl.clk.now()
		epoch, err := e.Campaign(cctx, t.values[0])
		t.ret = cl.clk.now()
		ccancel()
		if !cl.count.tally(err) {
			continue
		}
		t.epoch = epoch
		w.mu.Lock()
		w.terms = append(w.terms, t)
		w.mu.Unlock()
		if !w.lead(ctx, cl, lc, s, e, t, stop) {
			return
		}
	}
}

// lead acts as the leader of term t, then steps down one of four ways; it
// reports whether the session is still open for another Campaign.
func (w *electionWorkload) lead(ctx context.Context, cl *client, lc *fencer.Client, s *fencer.Session, e *fencer.Election, t *electionTerm, stop <-chan struct{}) (again bool) {
	g := grant{workload: "election", key: electionName, owner: t.id, token: t.epoch, ttl: electionTTL, call: t.call, ret: t.ret}
	defer func() {
		// The session's validity as the client counts it is final now:
		// closed, lost, abandoned (its keepalives have stopped), or the
		// term released by Resign.
		g.validUntil = int64(s.Until().Sub(cl.clk.start))
		w.grants.add(g)
	}()
	done := e.Done()
	if done == nil {
		// The term ended before Campaign's caller saw it.
		w.lost.Add(1)
		return s.Err() == nil
	}
	value := t.values[0]
	end := time.Now().Add(time.Duration(cl.rng.Int64N(int64(termMax))))
	for time.Now().Before(end) && !stopped(stop) {
		select {
		case <-done:
			// Lost under a fault: a leader that has not noticed yet
			// writes once more.
			w.lost.Add(1)
			w.lateWrite(cl, t, value)
			return s.Err() == nil
		default:
		}
		if err := w.store.write(t.epoch, t.id, value); err != nil {
			w.countRefused(err, false)
		} else {
			w.writes.Add(1)
		}
		switch r := cl.rng.IntN(10); {
		case r == 0:
			v := fmt.Sprintf("%s/%d", t.id, len(t.values))
			w.mu.Lock()
			t.values = append(t.values, v)
			w.mu.Unlock()
			pctx, pcancel := context.WithTimeout(ctx, clientTimeout)
			err := e.Proclaim(pctx, v)
			pcancel()
			if cl.count.tally(err) {
				w.proclaims.Add(1)
				value = v
			}
		case r == 1:
			w.readLeader(ctx, cl, e)
		}
		time.Sleep(leaderWriteEvery)
	}

	rctx, rcancel := context.WithTimeout(ctx, clientTimeout)
	defer rcancel()
	switch r := cl.rng.IntN(10); {
	case r < 5:
		w.resigns.Add(1)
		g.released = cl.clk.now()
		if !cl.count.tally(e.Resign(rctx)) {
			// Still leading, perhaps: a Campaign now would return this
			// term's epoch again. Leave the session to expire.
			return false
		}
		return s.Err() == nil
	case r < 7:
		w.closes.Add(1)
		g.released = cl.clk.now()
		cl.count.tally(s.Close(rctx))
		return false
	default:
		// Abandoned: the client goes away without a word (no CLOSE; the
		// session expires), and the deposed leader writes on with its
		// old epoch for a while.
		w.abandons.Add(1)
		_ = lc.Close()
		until := time.Now().Add(2*electionTTL + time.Duration(cl.rng.Int64N(int64(electionTTL))))
		for time.Now().Before(until) && !stopped(stop) {
			w.lateWrite(cl, t, value)
			time.Sleep(4 * leaderWriteEvery)
		}
		return false
	}
}

// lateWrite is a write by a leader that may have been deposed.
func (w *electionWorkload) lateWrite(cl *client, t *electionTerm, value string) {
	w.lateWrites.Add(1)
	if err := w.store.write(t.epoch, t.id, value); err != nil {
		w.countRefused(err, true)
	} else {
		w.writes.Add(1)
	}
}

func (w *electionWorkload) countRefused(err error, late bool) {
	var stale *fence.StaleTokenError
	if errors.As(err, &stale) && late {
		w.lateRefused.Add(1)
	}
}

// readLeader reads Leader() and records what it returned.
func (w *electionWorkload) readLeader(ctx context.Context, cl *client, e *fencer.Election) {
	lctx, lcancel := context.WithTimeout(ctx, clientTimeout)
	defer lcancel()
	r := leaderRead{client: cl.name, call: cl.clk.now()}
	l, err := e.Leader(lctx)
	r.ret = cl.clk.now()
	switch {
	case errors.Is(err, fencer.ErrNotElected):
		r.none = true
	case err != nil:
		cl.count.tally(err)
		return
	default:
		r.epoch, r.value = l.Epoch, l.Value
	}
	cl.count.tally(nil)
	w.mu.Lock()
	w.reads = append(w.reads, r)
	w.mu.Unlock()
}

// check runs the election's three checkers.
func (w *electionWorkload) check() []checkResult {
	w.mu.Lock()
	defer w.mu.Unlock()
	return []checkResult{w.checkEpochs(), w.checkStore(), w.checkReads()}
}

// checkEpochs: one leader per epoch, and a Campaign that began after
// another returned got a larger epoch.
func (w *electionWorkload) checkEpochs() checkResult {
	res := checkResult{name: "election: one leader per epoch, epochs increase", checked: len(w.terms)}
	byEpoch := make(map[uint64]*electionTerm)
	for _, t := range w.terms {
		if p, seen := byEpoch[t.epoch]; seen {
			res.violations = append(res.violations, fmt.Sprintf("epoch %d elected two leaders: %s (session %d, +%v) and %s (session %d, +%v)",
				t.epoch, p.id, p.session, time.Duration(p.ret), t.id, t.session, time.Duration(t.ret)))
		}
		byEpoch[t.epoch] = t
	}
	byCall := slices.Clone(w.terms)
	sort.Slice(byCall, func(i, j int) bool { return byCall[i].call < byCall[j].call })
	byRet := slices.Clone(w.terms)
	sort.Slice(byRet, func(i, j int) bool { return byRet[i].ret < byRet[j].ret })
	var top *electionTerm // the largest epoch among the terms returned so far
	next := 0
	for _, t := range byCall {
		for next < len(byRet) && byRet[next].ret < t.call {
			if top == nil || byRet[next].epoch > top.epoch {
				top = byRet[next]
			}
			next++
		}
		if top != nil && t.epoch <= top.epoch {
			res.violations = append(res.violations, fmt.Sprintf("%s was elected with epoch %d (Campaign called at +%v), not above epoch %d that %s was elected with at +%v",
				t.id, t.epoch, time.Duration(t.call), top.epoch, top.id, time.Duration(top.ret)))
		}
	}
	if len(w.terms) > 0 {
		lo := slices.MinFunc(w.terms, func(a, b *electionTerm) int { return cmp.Compare(a.epoch, b.epoch) })
		hi := slices.MaxFunc(w.terms, func(a, b *electionTerm) int { return cmp.Compare(a.epoch, b.epoch) })
		res.notes = append(res.notes, fmt.Sprintf("%d terms, epochs %d..%d; %d resigned, %d closed the session, %d abandoned it, %d lost to a fault; %d proclaims",
			len(w.terms), lo.epoch, hi.epoch, w.resigns.Load(), w.closes.Load(), w.abandons.Load(), w.lost.Load(), w.proclaims.Load()))
	}
	return res
}

// checkStore: the store accepted writes in epoch order, each epoch's from
// the campaigner elected with it, and never one below an epoch it had
// accepted.
func (w *electionWorkload) checkStore() checkResult {
	s := w.store
	s.mu.Lock()
	defer s.mu.Unlock()
	res := checkResult{name: "election: fenced store", checked: len(s.accepted)}
	byEpoch := make(map[uint64]*electionTerm)
	for _, t := range w.terms {
		byEpoch[t.epoch] = t
	}
	for _, a := range s.stale {
		res.violations = append(res.violations, fmt.Sprintf("the store accepted %s's write with epoch %d after a higher epoch", a.term, a.epoch))
	}
	var last epochWrite
	for i, a := range s.accepted {
		if i > 0 && a.epoch < last.epoch {
			res.violations = append(res.violations, fmt.Sprintf("the store accepted epoch %d (%s) after epoch %d (%s)", a.epoch, a.term, last.epoch, last.term))
		}
		if i > 0 && a.epoch == last.epoch && a.term != last.term {
			res.violations = append(res.violations, fmt.Sprintf("epoch %d wrote as two leaders: %s and %s", a.epoch, last.term, a.term))
		}
		if t, known := byEpoch[a.epoch]; known && t.id != a.term {
			res.violations = append(res.violations, fmt.Sprintf("%s wrote with epoch %d, which %s was elected with", a.term, a.epoch, t.id))
		}
		last = a
	}
	res.notes = append(res.notes, fmt.Sprintf("%d writes accepted; %d writes by leaders that lost or abandoned their term, %d refused as stale",
		len(s.accepted), w.lateWrites.Load(), w.lateRefused.Load()))
	return res
}

// checkReads: Leader() never returns an epoch below one that a Campaign
// had returned before the read was sent, nor a value its leader never
// announced.
func (w *electionWorkload) checkReads() checkResult {
	res := checkResult{name: "election: Leader() reads", checked: len(w.reads)}
	byEpoch := make(map[uint64]*electionTerm)
	for _, t := range w.terms {
		byEpoch[t.epoch] = t
	}
	byRet := slices.Clone(w.terms)
	sort.Slice(byRet, func(i, j int) bool { return byRet[i].ret < byRet[j].ret })
	reads := slices.Clone(w.reads)
	sort.Slice(reads, func(i, j int) bool { return reads[i].call < reads[j].call })
	var top *electionTerm
	next, none := 0, 0
	for _, r := range reads {
		for next < len(byRet) && byRet[next].ret < r.call {
			if top == nil || byRet[next].epoch > top.epoch {
				top = byRet[next]
			}
			next++
		}
		if r.none {
			none++
			continue
		}
		if top != nil && r.epoch < top.epoch {
			res.violations = append(res.violations, fmt.Sprintf("%s read leader epoch %d (sent at +%v), below epoch %d that %s was elected with at +%v",
				r.client, r.epoch, time.Duration(r.call), top.epoch, top.id, time.Duration(top.ret)))
		}
		if t, known := byEpoch[r.epoch]; known && !slices.Contains(t.values, r.value) {
			res.violations = append(res.violations, fmt.Sprintf("%s read leader epoch %d with value %q, which %s never announced (%v)",
				r.client, r.epoch, r.value, t.id, t.values))
		}
	}
	res.notes = append(res.notes, fmt.Sprintf("%d reads found no leader", none))
	return res
}

// TestChaosElection runs the campaign on three nodes with the election
// workload alone: two campaigners per node unless CHAOS_CLIENTS says.
func TestChaosElection(t *testing.T) { testChaosWorkload(t, wlElection, 2) }
