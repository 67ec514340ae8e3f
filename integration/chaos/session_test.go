//go:build linux

package chaos

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Workload wlSessions: locks held under sessions (FENCE.SESSION), over
// plain RESP so that every request is timed where it is sent. A client
// opens a session with a short TTL and keeps it alive from a goroutine of
// its own (KEEPALIVE every TTL/3 on a second connection), takes a few locks
// under it with WAIT, does the fenced read-modify-write of workload 3 under
// each (a store of its own, on keys of its own), holds them across
// keepalives, releases some, and then ends the session in one of three
// ways: CLOSE, REVOKE, or abandoning it (its keepalives stop, as when a
// client dies or pauses). An abandoned session's client sometimes writes
// once more with a token it held, late, as a paused client would: the
// store must refuse it if a later holder wrote. Once a client has seen its
// session end (KEEPALIVE 0, INFO null, NOSESSION, or its own CLOSE or
// REVOKE acknowledged), it probes it: an ACQUIRE under it must be refused
// with NOSESSION.
//
// The grants join the shared log, so the early-expiry and token checkers
// cover them: a lock under a session is valid until the session's validity
// as the client counts it (the newest acknowledged OPEN or KEEPALIVE's send
// time plus the TTL), unless released (RELEASE, or the CLOSE or REVOKE of
// its session) before. The workload's own checker: no lock is granted under
// a session whose request was sent after the client saw the session end,
// and a session seen ended is never seen open again.
const (
	sessionTTL  = 1500 * time.Millisecond
	sessionWait = 2 * time.Second
	sessionKeys = 3
	// sessionEndedWithin bounds how long an abandoned session's client
	// waits to see the session end: the TTL after its last keepalive, and
	// a full TTL again after each leader change (expiry timers restart on
	// a new leader).
	sessionEndedWithin = 15 * time.Second
)

// sessionWorkload is workload wlSessions.
type sessionWorkload struct {
	grants *grantLog
	fenced *fencedWorkload // its store, on keys sreg-N

	mu       sync.Mutex
	sessions []*sessionRecord

	probes, probesRefused, lateWrites, lateRefused atomic.Int64
}

func newSessionWorkload(grants *grantLog) *sessionWorkload {
	return &sessionWorkload{grants: grants, fenced: newFencedWorkload(grants)}
}

// sessionRecord is what one client saw of one session. Its fields are
// guarded by mu: the keepalive goroutine and the client's own share it.
type sessionRecord struct {
	mu     sync.Mutex
	id     uint64
	client string
	// validUntil is the newest acknowledged OPEN's or KEEPALIVE's send
	// time plus the TTL: the server does not end the session before.
	validUntil int64
	// ended is the earliest return of a reply that said the session is
	// not open (or that it was closed or revoked now), zero if none did;
	// endedBy says which.
	ended   int64
	endedBy string
	// endSent is when the first CLOSE or REVOKE that may have taken
	// effect was sent (zero if none): it releases the session's locks.
	endSent int64
	how     string // closed, revoked or abandoned
	// grants are the grants under the session, probes included.
	grants []sessionGrant
	// reopened are replies, after ended, that said the session is open.
	reopened []string
}

// sessionGrant is one ACQUIRE under a session that was answered with a
// grant.
type sessionGrant struct {
	g     grant
	probe bool // sent to test a session already seen ended
}

// sawEnded records a reply, returned at ret, saying the session is not
// open (or was just ended by the client).
func (s *sessionRecord) sawEnded(ret int64, by string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended == 0 || ret < s.ended {
		s.ended, s.endedBy = ret, by
	}
}

// sawOpen records a reply, sent at call, saying the session is open.
func (s *sessionRecord) sawOpen(call int64, what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended != 0 && call > s.ended {
		s.reopened = append(s.reopened, fmt.Sprintf("%s sent at +%v", what, time.Duration(call)))
	}
}

func (s *sessionRecord) setHow(how string) {
	s.mu.Lock()
	s.how = how
	s.mu.Unlock()
}

func (s *sessionRecord) endedAt() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ended
}

func (w *sessionWorkload) run(cl *client, stop <-chan struct{}) {
	for !stopped(stop) {
		s := w.open(cl)
		if s == nil {
			cl.think()
			continue
		}
		w.use(cl, s, stop)
		cl.think()
	}
}

// open opens a session and starts its keepalive goroutine; nil if the open
// failed or its outcome is unknown (an unknown open leaves a session that
// holds nothing and expires).
func (w *sessionWorkload) open(cl *client) *sessionRecord {
	v, out, call, _ := cl.do(clientTimeout, "FENCE.SESSION", "OPEN", ms(sessionTTL))
	if out != ok {
		return nil
	}
	id, isInt := v.(int64)
	if !isInt || id <= 0 {
		cl.count.odd("FENCE.SESSION OPEN", v)
		return nil
	}
	s := &sessionRecord{id: uint64(id), client: cl.name, validUntil: call + int64(sessionTTL)}
	w.mu.Lock()
	w.sessions = append(w.sessions, s)
	w.mu.Unlock()
	return s
}

// keepAlive renews s every TTL/3 on a connection of its own until stop is
// closed or the server says s is not open.
func (w *sessionWorkload) keepAlive(cl *client, s *sessionRecord, stop <-chan struct{}) {
	// A client of its own (no random generator: that is the main
	// goroutine's), on a connection of its own.
	ka := &client{id: cl.id, name: cl.name, node: cl.node, clk: cl.clk, count: cl.count, conn: respConn{dial: cl.conn.dial}}
	defer ka.conn.close()
	next := time.Now()
	for {
		next = next.Add(sessionTTL / 3)
		select {
		case <-stop:
			return
		case <-time.After(time.Until(next)):
		}
		v, out, call, ret := ka.do(sessionTTL/2, "FENCE.SESSION", "KEEPALIVE", fmt.Sprint(s.id))
		if out != ok {
			continue
		}
		switch v {
		case int64(1):
			s.sawOpen(call, "KEEPALIVE answered 1")
			s.mu.Lock()
			s.validUntil = max(s.validUntil, call+int64(sessionTTL))
			s.mu.Unlock()
		case int64(0):
			s.sawEnded(ret, "KEEPALIVE answered 0")
			return
		default:
			cl.count.odd("FENCE.SESSION KEEPALIVE", v)
		}
	}
}

// use runs one session: locks taken and released under it, then its end.
func (w *sessionWorkload) use(cl *client, s *sessionRecord, stop <-chan struct{}) {
	kaStop := make(chan struct{})
	var kaDone sync.WaitGroup
	kaDone.Go(func() { w.keepAlive(cl, s, kaStop) })
	stopKeepAlive := func() {
		select {
		case <-kaStop:
		default:
			close(kaStop)
		}
		kaDone.Wait()
	}
	defer stopKeepAlive()

	// held are the grants not released yet, done the released ones;
	// both go to the shared log once the session's validity is final.
	var held, done []grant
	rounds := 2 + cl.rng.IntN(5)
	for r := 0; r < rounds && !stopped(stop) && s.endedAt() == 0; r++ {
		if key := freeKey(cl, held); key != "" {
			if g, granted := w.acquire(cl, s, key, false); granted {
				held = append(held, g)
				w.fenced.readModifyWrite(cl, g.key, g.owner, g.token)
			}
		}
		// Hold, across a keepalive now and then.
		time.Sleep(time.Duration(cl.rng.Int64N(int64(sessionTTL / 2))))
		if len(held) > 0 && cl.rng.IntN(2) == 0 {
			i := cl.rng.IntN(len(held))
			w.release(cl, s, &held[i])
			done = append(done, held[i])
			held = append(held[:i], held[i+1:]...)
		}
	}

	switch r := cl.rng.IntN(10); {
	case r < 4:
		s.setHow("closed")
		w.end(cl, s, "CLOSE")
	case r < 5:
		s.setHow("revoked")
		w.end(cl, s, "REVOKE")
	default:
		s.setHow("abandoned")
		stopKeepAlive()
		if len(held) > 0 && cl.rng.IntN(2) == 0 {
			// A paused client: it writes after its session ran out, with
			// the token it held.
			time.Sleep(2*sessionTTL + time.Duration(cl.rng.Int64N(int64(sessionTTL))))
			g := held[cl.rng.IntN(len(held))]
			n := w.lateWrites.Add(1)
			before := w.fenced.stale.Load()
			// A write of its own: the grant's first write has the owner
			// as its ID.
			w.fenced.readModifyWrite(cl, g.key, lateWriteID(g.owner, n), g.token)
			if w.fenced.stale.Load() > before {
				w.lateRefused.Add(1)
			}
		}
		w.awaitEnded(cl, s, stop)
	}
	stopKeepAlive()
	for _, g := range append(held, done...) {
		w.log(s, g)
	}
	if s.endedAt() != 0 {
		w.probe(cl, s)
	}
}

// freeKey picks a key of the workload that the session does not hold, or
// "" if it holds them all.
func freeKey(cl *client, held []grant) string {
	var free []string
	for i := range sessionKeys {
		key := fmt.Sprintf("sreg-%d", i)
		if !slices.ContainsFunc(held, func(g grant) bool { return g.key == key }) {
			free = append(free, key)
		}
	}
	if len(free) == 0 {
		return ""
	}
	return free[cl.rng.IntN(len(free))]
}

// acquire sends FENCE.ACQUIRE key owner 0 WAIT ms SESSION id (no WAIT for a
// probe) and records what the answer says of the session. An unknown
// outcome is released until known.
func (w *sessionWorkload) acquire(cl *client, s *sessionRecord, key string, probe bool) (grant, bool) {
	owner := cl.owner()
	args := []string{"FENCE.ACQUIRE", key, owner, "0"}
	timeout := clientTimeout
	if !probe {
		args = append(args, "WAIT", ms(sessionWait))
		timeout += sessionWait
	}
	args = append(args, "SESSION", fmt.Sprint(s.id))
	v, out, call, ret := cl.do(timeout, args...)
	switch out {
	case unknown:
		w.releaseUntilKnown(cl, s, key, owner, nil)
		return grant{}, false
	case failed:
		if e, isErr := v.(respError); isErr && e.Code() == "NOSESSION" {
			s.sawEnded(ret, "ACQUIRE answered NOSESSION")
		}
		return grant{}, false
	}
	tok, granted, err := asGrant(v)
	if err != nil {
		cl.count.odd("FENCE.ACQUIRE SESSION", v)
		return grant{}, false
	}
	if !granted {
		return grant{}, false
	}
	s.sawOpen(call, fmt.Sprintf("ACQUIRE %s granted (token %d)", key, tok))
	g := grant{workload: "sessions", key: key, owner: owner, token: tok, ttl: sessionTTL, call: call, ret: ret}
	s.mu.Lock()
	s.grants = append(s.grants, sessionGrant{g: g, probe: probe})
	s.mu.Unlock()
	return g, true
}

// release releases g under s until the outcome is known.
func (w *sessionWorkload) release(cl *client, s *sessionRecord, g *grant) {
	w.releaseUntilKnown(cl, s, g.key, g.owner, g)
}

// releaseUntilKnown sends RELEASE key owner SESSION id until it is
// answered (1, 0 or NOSESSION), for at most 30 s; g, if set, records when
// the first attempt that may have taken effect was sent.
func (w *sessionWorkload) releaseUntilKnown(cl *client, s *sessionRecord, key, owner string, g *grant) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		v, out, call, ret := cl.do(clientTimeout, "FENCE.RELEASE", key, owner, "SESSION", fmt.Sprint(s.id))
		if g != nil && g.released == 0 && out != failed {
			g.released = call
		}
		if out == ok {
			return
		}
		if e, isErr := v.(respError); isErr && e.Code() == "NOSESSION" {
			s.sawEnded(ret, "RELEASE answered NOSESSION")
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// end sends FENCE.SESSION CLOSE or REVOKE until it is answered.
func (w *sessionWorkload) end(cl *client, s *sessionRecord, sub string) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		v, out, call, ret := cl.do(clientTimeout, "FENCE.SESSION", sub, fmt.Sprint(s.id))
		if out != failed {
			s.mu.Lock()
			if s.endSent == 0 {
				s.endSent = call
			}
			s.mu.Unlock()
		}
		if out == ok {
			switch v {
			case int64(1):
				s.sawEnded(ret, sub+" answered 1")
			case int64(0):
				s.sawEnded(ret, sub+" answered 0")
			default:
				cl.count.odd("FENCE.SESSION "+sub, v)
			}
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// awaitEnded polls FENCE.SESSION INFO (which does not renew) until the
// session is seen ended, for at most sessionEndedWithin.
func (w *sessionWorkload) awaitEnded(cl *client, s *sessionRecord, stop <-chan struct{}) {
	deadline := time.Now().Add(sessionEndedWithin)
	for time.Now().Before(deadline) && !stopped(stop) {
		v, out, call, ret := cl.do(clientTimeout, "FENCE.SESSION", "INFO", fmt.Sprint(s.id))
		if out == ok {
			if v == nil {
				s.sawEnded(ret, "INFO answered null")
				return
			}
			if _, isArr := v.([]any); !isArr {
				cl.count.odd("FENCE.SESSION INFO", v)
				return
			}
			s.sawOpen(call, "INFO answered open")
		}
		time.Sleep(sessionTTL / 3)
	}
}

// probe sends an ACQUIRE under a session the client saw end: it must be
// refused with NOSESSION. A grant is released and left to the checker.
func (w *sessionWorkload) probe(cl *client, s *sessionRecord) {
	w.probes.Add(1)
	key := fmt.Sprintf("sreg-%d", cl.rng.IntN(sessionKeys))
	g, granted := w.acquire(cl, s, key, true)
	if granted {
		w.release(cl, s, &g)
		return
	}
	if s.endedAt() != 0 {
		w.probesRefused.Add(1)
	}
}

// log adds g, a grant under s, to the shared log, with the session's
// validity and its end.
func (w *sessionWorkload) log(s *sessionRecord, g grant) {
	s.mu.Lock()
	g.validUntil = s.validUntil
	if s.endSent != 0 && (g.released == 0 || s.endSent < g.released) {
		g.released = s.endSent
	}
	s.mu.Unlock()
	w.grants.add(g)
}

// check: no grant under a session whose ACQUIRE was sent after the client
// had seen the session end, and no session seen open after it was seen
// ended.
func (w *sessionWorkload) check() checkResult {
	w.mu.Lock()
	defer w.mu.Unlock()
	res := checkResult{name: "sessions: no grant after the end"}
	hows := make(map[string]int)
	seenEnded := 0
	for _, s := range w.sessions {
		s.mu.Lock()
		hows[s.how]++
		if s.ended != 0 {
			seenEnded++
		}
		for _, sg := range s.grants {
			res.checked++
			if s.ended != 0 && sg.g.call > s.ended {
				res.violations = append(res.violations, fmt.Sprintf(
					"%s: session %d granted %s token %d to %s, ACQUIRE sent at +%v, after the client saw the session end at +%v (%s)",
					s.client, s.id, sg.g.key, sg.g.token, sg.g.owner, time.Duration(sg.g.call), time.Duration(s.ended), s.endedBy))
			}
		}
		for _, r := range s.reopened {
			res.violations = append(res.violations, fmt.Sprintf("%s: session %d seen ended at +%v (%s), then open: %s",
				s.client, s.id, time.Duration(s.ended), s.endedBy, r))
		}
		s.mu.Unlock()
	}
	var hs []string
	for h, n := range hows {
		if h == "" {
			h = "still open at the end"
		}
		hs = append(hs, fmt.Sprintf("%d %s", n, h))
	}
	sort.Strings(hs)
	res.notes = append(res.notes, fmt.Sprintf("%d sessions (%s), %d seen ended; %d probes under ended sessions, %d refused with NOSESSION; %d late writes after abandoning, %d refused as stale",
		len(w.sessions), strings.Join(hs, ", "), seenEnded, w.probes.Load(), w.probesRefused.Load(), w.lateWrites.Load(), w.lateRefused.Load()))
	return res
}

// checkFenced is the fenced store's check, named for this workload.
func (w *sessionWorkload) checkFenced() checkResult {
	res := w.fenced.check()
	res.name = "sessions: fenced read-modify-write"
	return res
}

// TestChaosSessions runs the campaign on three nodes with the sessions
// workload alone, three clients per node unless CHAOS_CLIENTS says.
func TestChaosSessions(t *testing.T) { testChaosWorkload(t, wlSessions, 3) }

// testChaosWorkload runs the campaign on three nodes with one workload and
// perNode clients per node (CHAOS_CLIENTS overrides it).
func testChaosWorkload(t *testing.T, kind workloadKind, perNode int) {
	requireRoot(t)
	cfg, run := envCampaign(t, 3)
	if !run {
		t.Skipf("CHAOS_NODES=%q leaves out 3 nodes", os.Getenv("CHAOS_NODES"))
	}
	cfg.workloads = []workloadKind{kind}
	if os.Getenv("CHAOS_CLIENTS") == "" {
		cfg.clientsPerNode = perNode
	}
	r := runCampaign(t, cfg)
	assertClean(t, r, minLeaderChanges(cfg.duration))
}
