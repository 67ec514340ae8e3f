package server

import (
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"time"

	"github.com/fencerlock/fencer/fsm"
	"github.com/hashicorp/raft"
)

// grants is a node's bookkeeping of what it grants, under a lock of its own:
// readiness, the lease timers, the wait queues, the acquires in progress and
// the grants made to waiters that had gone, the keys with a hand-off in
// flight, and the quota counts.
//
// The apply path (applier) holds mu while it applies entries, so that under
// mu the table, the lease deadlines and the queues agree: a grant is timed
// and its waiter answered in the critical section that applies it.
// Readiness and the wait queue share mu: a request queues only after it saw,
// under mu, that the node is a ready leader, and the end of readiness
// answers every waiter under the same lock, so no waiter is left queued on
// a node that no longer grants.
//
// Methods whose names end in Locked are called with mu held; the others take
// it. Lock order: mu, then the table's own lock.
type grants struct {
	table *fsm.Table
	log   *slog.Logger
	// raft is set once Raft has started, before readiness can be; it is
	// read only while ready.
	raft *raft.Raft
	// propose proposes a command without waiting for it (Node.proposeAsync);
	// kick wakes the expiry loop. Neither blocks.
	propose  func(fsm.Command)
	kick     func()
	maxLocks int
	// maxSessionLocks bounds the locks one session holds.
	maxSessionLocks int

	mu    sync.Mutex
	ready bool // leader that has applied its whole log and restarted leases
	// readyTerm is the Raft term in which ready was set: readiness holds
	// only while the node still leads in that term (readyLocked), whatever
	// the leader channel has or has not said since.
	readyTerm uint64
	changed   chan struct{} // closed and replaced when leadership or readiness changes
	closed    bool
	leases    *lessor
	sessions  *sessionTimers
	quotas    *quotas // held locks per Config.Quotas pattern
	waits     *waitQueues
	live      map[ownerKey]int // acquires in progress per (key, owner)
	// undelivered holds grants made to waiters that had gone, while the
	// same owner still had an acquire in progress that might return them.
	undelivered map[ownerKey]uint64
	granting    map[string]bool // keys with an OpGrant in flight
	armed       time.Time       // when the expiry loop will next wake
	// grantedWaiter is set when an applied entry granted a waiter, and
	// taken by the apply that ends (unlockAndYieldToGranted).
	grantedWaiter bool
}

type ownerKey struct{ key, owner string }

func newGrants(table *fsm.Table, log *slog.Logger, q []Quota, maxLocks int) *grants {
	g := &grants{
		table:    table,
		log:      log,
		maxLocks: maxLocks,
		changed:  make(chan struct{}),
		leases:   newLessor(table),
		quotas:   newQuotas(q),
		waits:    newWaitQueues(),
		live:     make(map[ownerKey]int),
		granting: make(map[string]bool),
	}
	g.sessions = newSessionTimers(g.leases)
	return g
}

// readyLocked reports whether the node is a ready leader: the watcher made it
// ready, and it still leads in the term it was made ready in. The second half
// covers the time before the watcher hears of a step-down, or when raft's
// channel lost the notice.
func (g *grants) readyLocked() bool {
	return g.ready && g.raft.State() == raft.Leader && g.raft.CurrentTerm() == g.readyTerm
}

// state returns, at one moment, whether the node is a ready leader, whether
// it is closed, and the channel closed at the next change of either.
func (g *grants) state() (ready, closed bool, changed <-chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.readyLocked(), g.closed, g.changed
}

// signalChangedLocked wakes everyone waiting for a leadership change.
func (g *grants) signalChangedLocked() {
	close(g.changed)
	g.changed = make(chan struct{})
}

// notReady ends readiness. Waiters queued while the node was ready are
// answered ErrUnknownOutcome: a grant to one of them may be in an entry
// whose fate is now unknown.
func (g *grants) notReady() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.ready {
		return
	}
	g.ready = false
	g.waits.failAll(ErrUnknownOutcome)
	g.signalChangedLocked()
}

// becomeReady makes the node a ready leader in term, restarting every lease
// at its full TTL (unless restart is false: a fault build's bug), if it
// still leads in that term and is not closed. It reports whether it did.
func (g *grants) becomeReady(term uint64, restart bool) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.raft.State() != raft.Leader || g.raft.CurrentTerm() != term || g.closed {
		return false
	}
	if restart {
		now := time.Now()
		g.leases.restartAll(now)
		g.sessions.restartAll(now)
	}
	// Grants in flight belonged to the term before.
	clear(g.granting)
	g.ready, g.readyTerm = true, term
	g.signalChangedLocked()
	return true
}

// close marks the node closed and answers every waiter (an entry handing a
// lock to one of them may be in flight). It reports false if the node was
// already closed.
func (g *grants) close() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.closed = true
	g.ready = false
	g.waits.failAll(fmt.Errorf("%w: %w", ErrUnknownOutcome, ErrShutdown))
	g.signalChangedLocked()
	return true
}

// isClosed reports whether close was called.
func (g *grants) isClosed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closed
}

// waiting returns the number of queued acquires.
func (g *grants) waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waits.count()
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

// expired returns the ref of key's lease (of owner's holder of a shared
// key) if it has run out on this leader
// (its Expire not yet committed), with the head waiter the expiry hands the
// key to; nil if the key is free or its lease runs.
func (g *grants) expired(key, owner string) (*fsm.LeaseRef, *fsm.Waiter) {
	g.mu.Lock()
	defer g.mu.Unlock()
	l, held := g.table.Get(key)
	if held && l.Kind == fsm.KindShared {
		// A shared key's lease is its holder's: owner's.
		h := l.Holder(owner, 0)
		if h == nil {
			return nil, nil
		}
		l = h.Lease
	}
	if !held || g.leases.remaining(l, time.Now()) > 0 {
		return nil, nil
	}
	ref := l.Ref()
	return &ref, g.headWaiterLocked(key)
}

// lease returns key's lock in the table and the time left on it on this
// node's lease clock, read together (the clock too, under the lock).
func (g *grants) lease(key string) (l fsm.Lease, held bool, remaining time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	l, held = g.table.Get(key)
	if held {
		now := time.Now()
		remaining = g.leases.remaining(l, now)
		if l.Session != 0 {
			// Held until its session's end commits, and at least
			// until the session runs out.
			rem, _ := g.sessionRemainingLocked(l.Session, now)
			remaining = max(rem, time.Millisecond)
		}
	}
	return l, held, remaining
}

// checkNewLocked applies the limits on keys to a key an acquire would add
// to the table (Config.MaxLocks, the quotas); pending counts keys the same
// request adds before it. A key already in the table passes.
func (g *grants) checkNewLocked(key string, pending int) error {
	if g.table.Has(key) {
		return nil
	}
	if g.table.Len()+pending >= g.maxLocks {
		return fmt.Errorf("%w: the lock table holds its maximum of %d locks", ErrLimit, g.maxLocks)
	}
	return g.quotas.check(key)
}

// due returns an Expire, handing the key to its head waiter, for every lease
// whose deadline has passed, and how long until the next deadline; none and
// an hour unless the node is a ready leader.
func (g *grants) due() ([]fsm.Command, time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now()
	var cmds []fsm.Command
	ready := g.readyLocked()
	if ready {
		for _, d := range g.leases.due(now) {
			c := fsm.Command{Op: fsm.OpExpire, Key: d.key, Lease: &fsm.LeaseRef{Token: d.ref.Token, Version: d.ref.Version}}
			c.Waiter = g.headWaiterLocked(d.key)
			cmds = append(cmds, c)
		}
		for _, d := range g.sessions.due(now) {
			cmds = append(cmds, fsm.Command{Op: fsm.OpSessionExpire, Session: d.id,
				Lease: &fsm.LeaseRef{Version: d.version}, Waiters: g.sessionWaitersLocked(d.id)})
		}
	}
	wait := time.Hour
	if next, ok := g.leases.next(); ok && ready {
		wait = max(next.Sub(now), 0)
	}
	if next, ok := g.sessions.next(); ok && ready {
		wait = min(wait, max(next.Sub(now), 0))
	}
	g.armed = now.Add(wait)
	return cmds, wait
}

// retryExpire times the lease or session c (an Expire or SessionExpire)
// ends again after c failed to commit.
func (g *grants) retryExpire(c fsm.Command) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c.Op == fsm.OpSessionExpire {
		g.sessions.retry(c.Session, c.Lease.Version, time.Now())
		return
	}
	g.leases.retry(c.Key, *c.Lease, time.Now())
}

// grantFailed notes that the OpGrant of key did not commit.
func (g *grants) grantFailed(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.granting, key)
}

// restoredLocked makes the bookkeeping follow a table restored from a
// snapshot: whatever was timed before is void, so every lease starts its
// full TTL, and the quotas are counted again.
func (g *grants) restoredLocked() {
	g.quotas.recount(g.table)
	now := time.Now()
	g.leases.restartAll(now)
	g.sessions.restartAll(now)
	g.kick()
}

// unlockAndYieldToGranted unlocks mu, which the apply holds, and, if the
// entries applied granted a waiter, lets the request that grant woke run
// before the FSM goroutine goes on. The woken goroutine waits on this
// goroutine's processor, and Raft, once the apply returns, answers its
// futures, whose waking goroutines would each run first (Go runs the
// goroutine woken last first). The granted waiter's reply is what the next
// holder waits for (docs/performance-log.md, What changed in the server,
// has the timings).
func (g *grants) unlockAndYieldToGranted() {
	granted := g.grantedWaiter
	g.grantedWaiter = false
	g.mu.Unlock()
	if granted {
		runtime.Gosched()
	}
}

// sessionAppliedLocked times a session an entry opened or renewed, and
// forgets one it ended; the locks an end freed follow as results of their
// own (appliedLocked, for each of r.Sub).
func (g *grants) sessionAppliedLocked(r *fsm.Result) {
	switch r.Code {
	case fsm.Opened, fsm.Extended:
		id := r.Cmd.Session
		if r.Code == fsm.Opened {
			id = r.Position
		}
		if s, ok := g.table.Session(id); ok && (g.ready || !faultActive(faultSkipLeaseRestart)) {
			g.sessions.set(id, s.Version, s.TTL, time.Now())
			if d, ok := g.sessions.next(); ok && g.ready && d.Before(g.armed) {
				g.kick()
			}
		}
	case fsm.Closed, fsm.Expired, fsm.Revoked:
		g.sessions.ended(r.Cmd.Session)
		// Waits under the session can never be granted: answer them now
		// rather than when their key is next freed. A free key whose
		// queue they headed goes to the next waiter.
		for _, key := range g.waits.failSession(r.Cmd.Session, ErrNoSession) {
			g.grantHeadLocked(key)
		}
	}
}

// sessionRemainingLocked returns how long session id has left on this
// node's lease clock, and whether it is open.
func (g *grants) sessionRemainingLocked(id uint64, now time.Time) (time.Duration, bool) {
	s, ok := g.table.Session(id)
	if !ok {
		return 0, false
	}
	return g.sessions.remaining(s, now), true
}

// appliedLocked updates lease timers, quotas and waiters after an entry.
func (g *grants) appliedLocked(r *fsm.Result) {
	g.quotas.applied(r, g.table)
	key := r.Cmd.Key
	if r.Freed != nil {
		g.leases.drop(key, r.Freed)
	}
	switch {
	case r.Code == fsm.Written:
		// A put: a new TTL is timed from now; a kept one keeps its
		// deadline, under the lease's new ref if the value changed.
		switch {
		case !g.ready && faultActive(faultSkipLeaseRestart):
		case r.Lease.TTL > 0 && r.Lease.Deadline != 0:
			g.leases.keep(key, r.Lease.Ref(), r.Lease.Deadline)
		default:
			g.leases.set(key, r.Lease, time.Now())
		}
		g.kickIfSoonerLocked(key, r.Lease.Ref())
	case r.Waiter == fsm.WaiterGranted,
		r.Code == fsm.Granted, r.Code == fsm.Renewed, r.Code == fsm.Extended:
		// (The skip-lease-restart fault also stops followers from timing
		// leases, so that a new leader that skips the restart inherits no
		// deadlines at all and frees leases early, as the bug would.)
		// A shared key's grant is its holder's lease.
		timed := r.Lease
		if r.Holder != nil {
			timed = r.Holder.Lease
		}
		if g.ready || !faultActive(faultSkipLeaseRestart) {
			g.leases.set(key, timed, time.Now())
		}
		g.kickIfSoonerLocked(key, timed.Ref())
	}
	if r.Cmd.Waiter != nil {
		g.answerWaiterLocked(r)
	}
	// The key is free, or a shared key whose holders would let its first
	// waiter join, but someone waits: the entry that freed it was proposed
	// before the waiter queued (or was a session's end that carried no
	// waiter for it, or handed a read-write lock to the first of several
	// readers). Hand it over now.
	if r.Lease.Token == 0 || r.Lease.Kind == fsm.KindShared {
		g.grantHeadLocked(key)
	}
}

// grantHeadLocked proposes the grant of key to its first waiter if the key
// would take it now (free, or a shared key it may join) and no grant of
// key is in flight, on a ready leader.
func (g *grants) grantHeadLocked(key string) {
	if g.granting[key] || !g.readyLocked() {
		return
	}
	if h := g.waits.head(key); h != nil && h.keys != nil {
		g.wakeManyLocked(h)
		return
	}
	w := g.headWaiterLocked(key)
	if w == nil {
		return
	}
	admits := true
	g.table.Peek(key, func(l *fsm.Lease) { admits = l == nil || l.Admits(*w) })
	if !admits {
		return
	}
	g.granting[key] = true
	g.propose(fsm.Command{Op: fsm.OpGrant, Key: key, Waiter: w})
}

// kickIfSoonerLocked wakes the expiry loop if the new deadline of key's
// lease ref comes before the loop's next wake-up.
func (g *grants) kickIfSoonerLocked(key string, ref fsm.LeaseRef) {
	if d, ok := g.leases.deadline(key, ref); ok && g.ready && d.Before(g.armed) {
		g.kick()
	}
}

// answerWaiterLocked answers the waiter an applied entry granted or refused.
func (g *grants) answerWaiterLocked(r *fsm.Result) {
	key, owner := r.Cmd.Key, r.Cmd.Waiter.Owner
	delete(g.granting, key)
	if r.Waiter == fsm.WaiterNone {
		return // the key was held: the waiter still waits
	}
	// The queue holds one waiter per (key, owner): the one there now may
	// acquire under another session than the entry's, having taken the
	// place of the one the entry names. The entry's outcome is not its.
	// Nor is it the waiter's if that one asks for another mode (a read
	// wait replaced by a write wait of the same owner).
	w := g.waits.takeFor(key, owner, r.Cmd.Waiter.Session, r.Cmd.Waiter.Mode, r.Cmd.Waiter.Permits)
	switch r.Waiter {
	case fsm.WaiterGranted:
		gr := grantOf(r)
		if w != nil {
			g.grantedWaiter = true
			w.answer(waitOutcome{granted: true, grant: gr})
		} else {
			// Its waiter has gone, or one asking for another session or
			// mode took its place (which this grant is not for).
			g.abandonedLocked(ownerKey{key, owner}, gr.Token)
		}
	case fsm.WaiterRefused:
		if w != nil {
			w.answer(waitOutcome{})
		}
	case fsm.WaiterNoSession:
		if w != nil {
			w.answer(waitOutcome{err: ErrNoSession})
		}
	}
}

// abandonedLocked handles a grant made to a waiter that has gone (its wait
// ended or its connection closed while the grant was in flight). If the owner
// has an acquire in progress, that request returns the same grant (the table
// renews a holder's acquire with its token); otherwise the grant is revoked by
// owner and token only, so nothing else is touched.
func (g *grants) abandonedLocked(ok ownerKey, token uint64) {
	if g.mayReturnLocked(ok) {
		g.undeliveredLocked(ok, token)
		return
	}
	g.revokeUndeliveredLocked(ok, token)
}

// undeliveredLocked notes a grant that reached no caller; it is revoked when
// the owner's last request in progress ends without returning it.
func (g *grants) undeliveredLocked(ok ownerKey, token uint64) {
	if g.undelivered == nil {
		g.undelivered = make(map[ownerKey]uint64)
	}
	g.undelivered[ok] = token
}

// revokeUndeliveredLocked revokes a grant that reached no caller, by owner
// and token only, so that nothing else is touched.
func (g *grants) revokeUndeliveredLocked(ok ownerKey, token uint64) {
	if !g.readyLocked() {
		// A new leader restarts the lease; it ends after its TTL.
		return
	}
	l, held := g.table.Get(ok.key)
	if held && l.Kind == fsm.KindShared {
		// The holder with that token, if it is still there.
		holders := l.Shared.Holders
		l, held = fsm.Lease{}, false
		for _, h := range holders {
			if h.Token == token {
				l, held = h.Lease, true
			}
		}
	}
	if !held || l.Owner != ok.owner || l.Token != token {
		return
	}
	g.log.Debug("revoking a grant no caller received", "key", ok.key, "owner", ok.owner, "token", token)
	// Naming the lock's session marks the revoke as the holder's own: a
	// session's keepalive must not report a lock it never knew it held.
	g.propose(fsm.Command{Op: fsm.OpRevoke, Key: ok.key, Owner: ok.owner, Session: l.Session,
		Lease: &fsm.LeaseRef{Token: token}, Waiter: g.headWaiterLocked(ok.key)})
}

// begin records an acquire of (key, owner) in progress; end must follow.
func (g *grants) begin(ok ownerKey) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.live[ok]++
}

// end ends one acquire of (key, owner) that returned token (zero: none). A
// grant made meanwhile to the owner's abandoned wait is revoked once no
// acquire of the owner is left that might return it.
func (g *grants) end(ok ownerKey, token uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.live[ok]--
	if t, has := g.undelivered[ok]; has && token != 0 && t == token {
		delete(g.undelivered, ok)
	}
	if g.live[ok] <= 0 {
		delete(g.live, ok)
	}
	if g.mayReturnLocked(ok) {
		return
	}
	if t, has := g.undelivered[ok]; has {
		delete(g.undelivered, ok)
		g.revokeUndeliveredLocked(ok, t)
	}
}

// mayReturnLocked reports whether an acquire of ok in progress may return
// a grant of the key to the owner that reached no caller: one that is not
// waiting in the key's queue. A queued waiter is answered only by a hand-off,
// which never returns a grant already made (the table hands a plain key only
// when free, and a shared key only as a new holder with a new token:
// Lease.Admits refuses a waiter whose owner holds it under the same
// session); it waits for the key the grant holds, and keeping the grant for
// it would stall it until its wait ends. (It is there when a wait for
// another mode or session took the place of the one the grant was for.)
func (g *grants) mayReturnLocked(ok ownerKey) bool {
	live := g.live[ok]
	if live > 0 && g.waits.queued(ok.key, ok.owner) {
		live--
	}
	return live > 0
}

// acquireStep is what plan decided an acquire does next.
type acquireStep struct {
	act    acquireAction
	cmd    fsm.Command // actPropose: the entry
	waiter *waiter     // actQueue: the queued wait
	err    error       // actFail
	// lost: the entry releases what is left of a multi-key grant the
	// owner no longer wholly holds (planMany); its answer is ErrLeaseLost.
	lost bool
}

// acquireAction says what an acquire does next.
type acquireAction int

const (
	actPropose  acquireAction = iota // propose the entry
	actQueue                         // wait for the queued waiter's answer
	actRefuse                        // answer "not granted" without an entry
	actNotReady                      // not a ready leader (any more): ask again
	actFail                          // answer the error
)

// plan decides, in one critical section, an acquire's next step: its entry,
// or a place in the wait queue (others already wait for the key, and the
// request may wait), or a refusal (the key's lease ran out but waiters come
// first; the expiry hands it to them), or an error (a key of another kind,
// a limit).
func (g *grants) plan(a acquireReq, waits bool) acquireStep {
	key, owner, ttl := a.key, a.owner, a.ttl
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.readyLocked() {
		// Stepped down since the caller's check: queueing here would
		// wait on a node nothing grants on.
		return acquireStep{act: actNotReady}
	}
	if a.mode != fsm.ModeNone {
		return g.planSharedLocked(a, waits)
	}
	c := fsm.Command{Op: fsm.OpAcquire, Key: key, Owner: owner, TTL: ttl, Redis: a.redis, Session: a.session, Data: a.value}
	l, held := g.table.Get(key)
	if held && l.Kind != fsm.KindString {
		return acquireStep{act: actFail, err: ErrWrongType}
	}
	if a.session != 0 {
		s, open := g.table.Session(a.session)
		switch {
		case !open:
			return acquireStep{act: actFail, err: ErrNoSession}
		case s.Locks >= g.maxSessionLocks && !(held && l.Owner == owner && l.Session == a.session):
			return acquireStep{act: actFail, err: fmt.Errorf("%w: the session holds its maximum of %d locks", ErrLimit, g.maxSessionLocks)}
		}
	}
	queued := g.waits.head(key) != nil
	expired := held && g.leases.remaining(l, time.Now()) <= 0
	switch {
	case queued && (!held || l.Owner != owner || l.Session != a.session || expired):
		// Waiters come first, also before a holder whose lease ran out.
		if waits {
			return acquireStep{act: actQueue, waiter: g.enqueueLocked(a)}
		}
		if expired || !held {
			// The key is free (or as good as) but kept for its first
			// waiter: a grant to it is in flight, or a multi-key
			// acquire waits for its other keys.
			return acquireStep{act: actRefuse}
		}
	case expired:
		// The lease ran out on this leader but its Expire is not yet
		// committed: end it in the same entry, so the lock reads and acts
		// as free at once (a holder then gets a new token, not a renewal).
		ref := l.Ref()
		c.Lease = &ref
	}
	if err := g.checkNewLocked(key, 0); err != nil { // passes a held key
		return acquireStep{act: actFail, err: err}
	}
	return acquireStep{act: actPropose, cmd: c}
}

// queueBehind queues an acquire that found key held by another owner,
// unless the lock changed hands since or the node no longer leads; nil then.
func (g *grants) queueBehind(a acquireReq) *waiter {
	g.mu.Lock()
	defer g.mu.Unlock()
	l, held := g.table.Get(a.key)
	if !held || !g.readyLocked() {
		return nil
	}
	if a.mode != fsm.ModeNone && l.Kind == fsm.KindShared && l.Holder(a.owner, a.session) == nil ||
		a.mode == fsm.ModeNone && !(l.Owner == a.owner && l.Session == a.session) {
		return g.enqueueLocked(a)
	}
	return nil
}

// acquireReq is an acquire as plan and the wait queue see it.
type acquireReq struct {
	key, owner string
	ttl        uint64 // milliseconds; zero under a session
	session    uint64 // zero: none
	value      string // the lock's value under a session
	redis      bool
	// mode and permits make it a shared acquire (fsm.Command.Mode).
	mode    fsm.Mode
	permits uint64
}

func (g *grants) enqueueLocked(a acquireReq) *waiter {
	w := &waiter{key: a.key, owner: a.owner, ttl: a.ttl, session: a.session, value: a.value,
		mode: a.mode, permits: a.permits, done: make(chan waitOutcome, 1)}
	g.waits.add(w)
	if g.waits.head(a.key) == w {
		// Freed (or, for a shared key, room made) between our look and
		// now: hand it over.
		g.grantHeadLocked(a.key)
	}
	return w
}

// withdraw removes w from its queue if it is still there and reports
// whether it was; if not, its answer is on w.done.
func (g *grants) withdraw(w *waiter) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waits.remove(w)
}

// noteUndelivered notes a grant whose caller had gone (see
// undeliveredLocked).
func (g *grants) noteUndelivered(ok ownerKey, token uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.undeliveredLocked(ok, token)
}

// locked runs fn under mu, for a transaction's reads of the table that must
// agree with the lease deadlines and the queues.
func (g *grants) locked(fn func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	fn()
}

// remaining returns how long lease l, read under mu, has left on this
// node's lease clock. It needs no lock: it reads only l and the clock.
func (g *grants) remaining(l fsm.Lease, now time.Time) time.Duration {
	return g.leases.remaining(l, now)
}
