package server

import (
	"log/slog"
	"runtime"
	"sync"
	"time"

	"github.com/fencerlock/fencer/fsm"
	"github.com/hashicorp/raft"
)

// grants is this node's state of what it grants and times: whether it is a
// ready leader, the lease deadlines, the wait queues, the acquires in
// progress and the grants that reached no caller, the keys with a hand-off
// in flight, and the quota counts. Each job has a type and file of its own:
//
//   - readiness (readiness.go): whether the node is a ready leader, and in
//     which term; its changes answer the wait queue.
//   - lessor (lessor.go, with its deadline queues in deadlines.go): the
//     deadlines of locks and sessions, and whether a lease ran out.
//   - waitQueues (waits.go): the acquires queued per key.
//   - deliveries (deliveries.go): acquires in progress, and grants made to
//     waiters that had gone.
//   - quotas (quota.go): held locks per Config.Quotas pattern.
//
// and grants' own methods, by job: planning an acquire (acquireplan.go,
// shared.go, multi.go), following an applied entry (applied.go), timing
// expiries (expiry.go).
//
// They share one lock, mu, because the jobs meet in one critical section:
// the apply path (applier) holds mu while it applies entries, so that under
// mu the table, the lease deadlines and the queues agree (a grant is timed
// and its waiter answered in the critical section that applies it); and
// readiness and the wait queue change together (a request queues only
// after it saw, under mu, that the node is a ready leader, and the end of
// readiness answers every waiter under the same lock, so no waiter is left
// queued on a node that no longer grants). The types above have no lock of
// their own; only grants' methods call them.
//
// Methods whose names end in Locked are called with mu held; the others take
// it. Lock order: mu, then the table's own lock.
type grants struct {
	table *fsm.Table
	log   *slog.Logger
	// propose proposes a command without waiting for it (Node.proposeAsync);
	// kick wakes the expiry loop. Neither blocks.
	propose  func(fsm.Command)
	kick     func()
	maxLocks int
	// maxSessionLocks bounds the locks one session holds.
	maxSessionLocks int
	// raft is set once Raft has started (Node.startRaft), before readiness
	// can be; it is read only while ready.
	raft *raft.Raft

	// mu guards every field below, the state of the types they point to,
	// and the table's node-local deadlines (fsm.Table.SetDeadline): the
	// applier holds it across each apply (lockApply).
	mu         sync.Mutex
	readiness  readiness
	lessor     *lessor
	quotas     *quotas
	waits      *waitQueues
	deliveries deliveries
	granting   map[string]bool // keys with an OpGrant in flight
	armed      time.Time       // when the expiry loop will next wake
	// grantedWaiter is set when an applied entry granted a waiter, and
	// taken by the apply that ends (unlockAndYieldToGranted).
	grantedWaiter bool
	// clients are the clients that took the live grants this node made
	// as the leader (clients.go).
	clients grantClients
}

// ownerKey is one owner's acquires of one key.
type ownerKey struct{ key, owner string }

func newGrants(table *fsm.Table, log *slog.Logger, q []Quota, maxLocks int) *grants {
	return &grants{
		table:      table,
		log:        log,
		maxLocks:   maxLocks,
		readiness:  readiness{changed: make(chan struct{})},
		lessor:     newLessor(table),
		quotas:     newQuotas(q),
		waits:      newWaitQueues(),
		deliveries: deliveries{live: make(map[ownerKey]int)},
		granting:   make(map[string]bool),
	}
}

// lockApply takes mu for the applier, which applies entries under it and
// ends with unlockAndYieldToGranted.
func (g *grants) lockApply() { g.mu.Lock() }

// locked runs fn under mu: for reads of the table that must agree with the
// lease deadlines and the queues (a transaction's, a keepalive's), and for
// a restore, which replaces the table under it. Other files take mu only
// through it, lockApply and the methods of grants.
func (g *grants) locked(fn func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	fn()
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
