package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencerlock/fencer/fsm"
	"github.com/fencerlock/fencer/internal/atomicfile"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// nodeIDFile holds the generated node ID inside the data directory.
const nodeIDFile = "node-id"

// Node is one fencer server: it owns a Raft instance, its stores and
// transport, the lock table, the leader's lease timers and wait queues.
type Node struct {
	cfg    Config
	id     string
	log    *slog.Logger
	raft   *raft.Raft
	table  *fsm.Table
	trans  raft.Transport
	store  RaftStore
	lock   *os.File // the data dir's lock
	stopCh chan struct{}
	wg     sync.WaitGroup
	batch  *batcher // every proposal goes through it (group commit)
	// latches serialize the transactions on the same keys (Update).
	latches *latches
	// snapPos is the table's position (fsm.Table.Position) when the last
	// snapshot was taken or restored.
	snapPos atomic.Uint64
	// hadState reports that DataDir held Raft state when the node opened.
	hadState bool

	// mu guards everything below. Lock order: mu, then the table's own lock.
	mu    sync.Mutex
	ready bool // leader that has applied its whole log and restarted leases
	// readyTerm is the Raft term in which ready was set: readiness holds
	// only while the node still leads in that term (readyLocked), whatever
	// the leader channel has or has not said since.
	readyTerm uint64
	changed   chan struct{} // closed and replaced when leadership or readiness changes
	closed    bool
	leases    *lessor
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
	wake          chan struct{}
	metrics       *metrics
}

type ownerKey struct{ key, owner string }

// Open starts a node from cfg. If cfg.DataDir holds no Raft state, it
// bootstraps a one-node cluster; otherwise it restarts from that state.
func Open(cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	if err := makeDataDir(cfg.DataDir); err != nil {
		return nil, err
	}
	lock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	id, err := nodeID(cfg.DataDir, cfg.ID)
	if err != nil {
		_ = lock.Close()
		return nil, err
	}
	n := &Node{
		cfg:      cfg,
		id:       id,
		lock:     lock,
		log:      logger.With("node", id),
		table:    fsm.New(),
		stopCh:   make(chan struct{}),
		changed:  make(chan struct{}),
		quotas:   newQuotas(cfg.Quotas),
		waits:    newWaitQueues(),
		live:     make(map[ownerKey]int),
		granting: make(map[string]bool),
		wake:     make(chan struct{}, 1),
		metrics:  newMetrics(),
		latches:  newLatches(),
	}
	n.leases = newLessor(n.table)
	if err := n.startRaft(); err != nil {
		n.closeStores()
		return nil, err
	}
	n.batch = newBatcher(func(data []byte) raft.ApplyFuture { return n.raft.Apply(data, 0) }, cfg.MaxBatch, 1)
	n.registerNodeGauges()
	n.wg.Add(4)
	go n.snapshotLoop()
	go n.watchLeadership()
	go n.expireLoop()
	go n.watchLeaderChanges()
	return n, nil
}

// nodeID returns the ID saved in dir, saving want (or a new random ID) the
// first time. A configured ID that differs from the saved one is an error:
// the Raft state on disk belongs to the saved ID.
func nodeID(dir, want string) (string, error) {
	path := filepath.Join(dir, nodeIDFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		saved := strings.TrimSpace(string(b))
		if want != "" && want != saved {
			return "", fmt.Errorf("server: config ID %q differs from %q saved in %s", want, saved, path)
		}
		return saved, nil
	case !errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("server: reading node id: %w", err)
	}
	// Raft state without the ID it belongs to: under another ID the node
	// would answer for votes and entries that are not its own.
	if has, err := hasRaftData(dir); err != nil {
		return "", err
	} else if has {
		return "", damaged(path, "missing beside the Raft state in %s", dir)
	}
	id := want
	if id == "" {
		var r [8]byte
		if _, err := rand.Read(r[:]); err != nil {
			return "", err
		}
		id = "node-" + hex.EncodeToString(r[:])
	}
	if err := atomicfile.Write(path, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("server: saving node id: %w", err)
	}
	return id, nil
}

func (n *Node) startRaft() error {
	cfg := n.cfg
	rc := RaftConfig(cfg)
	rc.LocalID = raft.ServerID(n.id)
	rc.Logger = hclog.New(&hclog.LoggerOptions{
		Name:   "raft",
		Level:  hclog.LevelFromString(cfg.RaftLogLevel),
		Output: os.Stderr,
	})

	kind, err := StoreKind(cfg.DataDir, cfg.LogStore)
	if err != nil {
		return err
	}
	store, err := OpenRaftStore(cfg.DataDir, kind)
	if err != nil {
		return err
	}
	n.store = store
	logs, err := raft.NewLogCache(RaftLogCacheSize, timedLogStore{store, n.metrics.fsync})
	if err != nil {
		return err
	}
	files, err := raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, cfg.SnapshotRetain, rc.Logger.Named("snapshot"))
	if err != nil {
		return fmt.Errorf("server: opening snapshot store: %w", err)
	}
	// The stores' files and directories are new the first time: make
	// their names durable before anything is written to them.
	if err := syncDir(cfg.DataDir); err != nil {
		return err
	}
	snaps := durableSnapshots{files, filepath.Join(cfg.DataDir, snapshotsDir)}
	if err := checkRecoverable(cfg.DataDir, store, store, snaps); err != nil {
		return err
	}
	if cfg.Transport != nil {
		n.trans = cfg.Transport
	} else {
		// Without RaftAdvertise the listener's own address is advertised,
		// so port 0 works (tests).
		var advAddr net.Addr
		if cfg.RaftAdvertise != "" {
			a, err := net.ResolveTCPAddr("tcp", cfg.RaftAdvertise)
			if err != nil {
				return fmt.Errorf("server: raft advertise address: %w", err)
			}
			advAddr = a
		}
		if cfg.RaftTLS != nil {
			stream, err := newTLSStream(cfg.RaftAddr, advAddr, cfg.RaftTLS)
			if err != nil {
				return fmt.Errorf("server: raft transport: %w", err)
			}
			n.trans = raft.NewNetworkTransportWithLogger(stream, RaftTransportPool, RaftTransportTimeout, rc.Logger.Named("transport"))
		} else {
			trans, err := raft.NewTCPTransportWithLogger(cfg.RaftAddr, advAddr, RaftTransportPool, RaftTransportTimeout, rc.Logger.Named("transport"))
			if err != nil {
				return fmt.Errorf("server: raft transport: %w", err)
			}
			n.trans = trans
		}
	}
	trans := n.trans

	existing, err := raft.HasExistingState(logs, store, snaps)
	if err != nil {
		return fmt.Errorf("server: reading raft state: %w", err)
	}
	n.hadState = existing
	switch {
	case existing:
		if cfg.Join {
			n.log.Info("restarting from existing state; join addresses are not needed")
		}
	case cfg.Join:
		if cfg.CheckJoin != nil {
			if err := cfg.CheckJoin(n.id); err != nil {
				return err
			}
		}
		n.log.Info("no state yet: waiting to be added to a cluster")
	default:
		conf := raft.Configuration{Servers: []raft.Server{{ID: rc.LocalID, Address: trans.LocalAddr()}}}
		if err := raft.BootstrapCluster(rc, logs, store, snaps, trans, conf); err != nil {
			return fmt.Errorf("server: bootstrap: %w", err)
		}
		n.log.Info("bootstrapped a new one-node cluster", "data_dir", cfg.DataDir)
	}
	r, err := raft.NewRaft(rc, (*stateMachine)(n), logs, store, snaps, trans)
	if err != nil {
		return fmt.Errorf("server: starting raft: %w", err)
	}
	n.raft = r
	return nil
}

// ID returns the node's Raft server ID.
func (n *Node) ID() string { return n.id }

// NeedsJoin reports that the node started without state in join mode: it is
// not a member of any cluster until a leader adds it (Join).
func (n *Node) NeedsJoin() bool { return n.cfg.Join && !n.hadState }

// RaftAddr returns the Raft address other nodes reach this node on.
func (n *Node) RaftAddr() string { return string(n.trans.LocalAddr()) }

// Leader returns the leader's ID and client address, as far as this node
// knows. Both are empty when no leader is known; the address is empty if the
// leader has not recorded one yet.
func (n *Node) Leader() (id, clientAddr string) {
	_, lid := n.raft.LeaderWithID()
	if lid == "" {
		return "", ""
	}
	return string(lid), n.clientAddrOf(string(lid))
}

func (n *Node) clientAddrOf(id string) string {
	if id == n.id {
		return n.cfg.ClientAddr
	}
	return n.table.Members()[id]
}

// Close stops the node: a leader of a cluster with other voters first hands
// leadership to one of them (bounded by shutdownTransferTimeout); then it
// answers every waiter, takes a snapshot if the log grew far past the last
// one (so the next start is quick), shuts Raft down and closes its stores.
// It is safe to call more than once.
func (n *Node) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.mu.Unlock()
	n.handOff()
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	n.ready = false
	// An entry handing the lock to a waiter may be in flight.
	n.waits.failAll(fmt.Errorf("%w: %w", ErrUnknownOutcome, ErrShutdown))
	n.signalChangedLocked()
	n.mu.Unlock()
	close(n.stopCh)
	n.snapshotBeforeStop()
	err := n.raft.Shutdown().Error()
	n.batch.stop()
	n.wg.Wait()
	n.closeStores()
	return err
}

func (n *Node) closeStores() {
	if c, ok := n.trans.(io.Closer); ok {
		_ = c.Close()
	}
	if n.store != nil {
		_ = n.store.Close()
	}
	_ = n.lock.Close()
}

// signalChangedLocked wakes everyone waiting for a leadership change.
func (n *Node) signalChangedLocked() {
	close(n.changed)
	n.changed = make(chan struct{})
}

// watchLeadership makes the node ready when it becomes leader: it first
// applies its whole log (Barrier), then restarts every lease at its full TTL.
//
// Raft's leader channel holds one value and overwrites it, so a step-down
// followed by a re-election can arrive as a single true. Readiness therefore
// follows the term, not the last value seen: a true clears readiness (and
// answers the waiters of any earlier term) before the Barrier, and the node
// becomes ready only if it still leads in the term the Barrier ran in.
func (n *Node) watchLeadership() {
	defer n.wg.Done()
	for {
		select {
		case <-n.stopCh:
			return
		case isLeader := <-n.raft.LeaderCh():
			if faultPoint("leader-ch", leaderNotice{n.id, isLeader}) {
				continue // a test drops this notification, as raft may
			}
			n.mu.Lock()
			n.notReadyLocked()
			n.mu.Unlock()
			if !isLeader {
				n.log.Info("lost leadership")
				continue
			}
			term := n.raft.CurrentTerm()
			// Barrier with no timeout: it returns once every earlier entry
			// is applied, or with an error if leadership is lost.
			if err := n.raft.Barrier(0).Error(); err != nil {
				n.log.Warn("barrier after election failed", "err", err)
				continue
			}
			n.mu.Lock()
			if n.raft.State() == raft.Leader && n.raft.CurrentTerm() == term && !n.closed {
				if !faultActive("skip-lease-restart") {
					n.leases.restartAll(time.Now())
				}
				n.ready, n.readyTerm = true, term
				n.signalChangedLocked()
				n.log.Info("leader ready", "term", term, "locks", n.table.Len(), "applied_index", n.raft.AppliedIndex())
			}
			n.mu.Unlock()
			n.kick()
			if n.table.Members()[n.id] != n.cfg.ClientAddr {
				n.proposeAsync(fsm.Command{Op: fsm.OpMember, Key: n.id, Owner: n.cfg.ClientAddr})
			}
		}
	}
}

// notReadyLocked ends readiness. Waiters queued while the node was ready are
// answered ErrUnknownOutcome: a grant to one of them may be in an entry
// whose fate is now unknown.
func (n *Node) notReadyLocked() {
	if !n.ready {
		return
	}
	n.ready = false
	n.waits.failAll(ErrUnknownOutcome)
	n.signalChangedLocked()
}

// readyLocked reports whether the node is a ready leader: the watcher made it
// ready, and it still leads in the term it was made ready in. The second half
// covers the time before the watcher hears of a step-down, or when raft's
// channel lost the notice.
func (n *Node) readyLocked() bool {
	return n.ready && n.raft.State() == raft.Leader && n.raft.CurrentTerm() == n.readyTerm
}

// leaderNotice is what the leader-ch fault point is told: which node's
// watcher received which value.
type leaderNotice struct {
	id     string
	leader bool
}

// isMember reports whether this node is in the latest Raft configuration it
// knows. A node that was removed, or that waits to join, is not.
func (n *Node) isMember() bool {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return true
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == n.id {
			return true
		}
	}
	return false
}

// kick wakes the expiry loop.
func (n *Node) kick() {
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// expireLoop proposes an Expire for every lease whose deadline passed, while
// this node is a ready leader.
func (n *Node) expireLoop() {
	defer n.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		n.mu.Lock()
		now := time.Now()
		var due []fsm.Command
		ready := n.readyLocked()
		if ready {
			for _, d := range n.leases.due(now) {
				c := fsm.Command{Op: fsm.OpExpire, Key: d.key, Lease: &fsm.LeaseRef{Token: d.ref.Token, Version: d.ref.Version}}
				c.Waiter = n.headWaiterLocked(d.key)
				due = append(due, c)
			}
		}
		wait := time.Hour
		if next, ok := n.leases.next(); ok && ready {
			wait = max(next.Sub(now), 0)
		}
		n.armed = now.Add(wait)
		n.mu.Unlock()

		if len(due) > 0 {
			go n.proposeExpires(due)
		}
		timer.Reset(wait)
		select {
		case <-n.stopCh:
			return
		case <-timer.C:
		case <-n.wake:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		}
	}
}

// proposeExpires commits Expire entries; one that fails is retried while the
// node is still a ready leader.
func (n *Node) proposeExpires(cmds []fsm.Command) {
	errs := make([]chan error, len(cmds))
	for i, c := range cmds {
		ch := make(chan error, 1)
		errs[i] = ch
		n.batch.submit(c.Encode(nil), func(_ *fsm.Result, err error) { ch <- err })
	}
	retry := false
	for i, ch := range errs {
		if err := <-ch; err != nil {
			n.mu.Lock()
			n.leases.retry(cmds[i].Key, *cmds[i].Lease, time.Now())
			n.mu.Unlock()
			retry = true
			n.log.Debug("expire not committed", "key", cmds[i].Key, "err", err)
		}
	}
	if retry {
		select {
		case <-n.stopCh:
		case <-time.After(50 * time.Millisecond):
			n.kick()
		}
	}
}

// stateMachine is the raft.FSM: the table, plus what the node does when an
// entry is applied (lease timers, waiters).
type stateMachine Node

func (m *stateMachine) Apply(l *raft.Log) interface{} {
	n := (*Node)(m)
	n.mu.Lock()
	res := n.applyLocked(l)
	n.unlockAndYieldToGranted()
	return res
}

// ApplyBatch makes stateMachine a raft.BatchingFSM: Raft hands it every
// entry committed together, and the node's lock is taken once for them all.
func (m *stateMachine) ApplyBatch(logs []*raft.Log) []interface{} {
	n := (*Node)(m)
	out := make([]interface{}, len(logs))
	n.mu.Lock()
	for i, l := range logs {
		out[i] = n.applyLocked(l)
	}
	n.unlockAndYieldToGranted()
	return out
}

// unlockAndYieldToGranted unlocks n.mu, which the apply holds, and, if the
// entries applied granted a waiter, lets the request that grant woke run
// before the FSM goroutine goes on. The woken goroutine waits on this
// goroutine's processor, and Raft, once the apply returns, answers its
// futures, whose waking goroutines would each run first (Go runs the
// goroutine woken last first): measured inside fencerd at 16 clients on one
// key, the granted waiter took 55-75 µs to run, and 5-15 µs with the yield.
// Its reply is what the next holder waits for (docs/performance.md).
func (n *Node) unlockAndYieldToGranted() {
	granted := n.grantedWaiter
	n.grantedWaiter = false
	n.mu.Unlock()
	if granted {
		runtime.Gosched()
	}
}

func (n *Node) applyLocked(l *raft.Log) interface{} {
	res := n.table.Apply(l)
	switch r := res.(type) {
	case *fsm.Result:
		n.resultLocked(r)
	case []*fsm.Result:
		// A batch: each command as if it had an entry of its own.
		for _, r := range r {
			n.resultLocked(r)
		}
	}
	return res
}

func (n *Node) resultLocked(r *fsm.Result) {
	if r.Cmd.Op == fsm.OpTxn {
		// Each command of an applied transaction as if it stood alone.
		for _, s := range r.Sub {
			n.resultLocked(s)
		}
		return
	}
	n.metrics.applied(r)
	n.quotas.applied(r)
	n.appliedLocked(r)
}

func (m *stateMachine) Snapshot() (raft.FSMSnapshot, error) {
	// Called on the FSM goroutine, so the position is the snapshot's.
	pos := m.table.Position()
	s, err := m.table.Snapshot()
	if err != nil {
		return nil, err
	}
	return &countedSnapshot{FSMSnapshot: s, n: (*Node)(m), pos: pos}, nil
}

// countedSnapshot records the snapshot's position as the node's last once it
// is saved, for snapshotLoop and snapshotBeforeStop.
type countedSnapshot struct {
	raft.FSMSnapshot
	n   *Node
	pos uint64
}

func (s *countedSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.FSMSnapshot.Persist(sink); err != nil {
		return err
	}
	s.n.snapPos.Store(s.pos)
	return nil
}

func (m *stateMachine) Restore(rc io.ReadCloser) error {
	n := (*Node)(m)
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.table.Restore(rc); err != nil {
		return err
	}
	n.snapPos.Store(n.table.Position())
	n.quotas.recount(n.table)
	// Whatever was timed before is void: every lease starts its full TTL.
	n.leases.restartAll(time.Now())
	n.kick()
	return nil
}

// appliedLocked updates lease timers and waiters after an entry.
func (n *Node) appliedLocked(r *fsm.Result) {
	key := r.Cmd.Key
	if r.Freed != nil {
		n.leases.drop(key, r.Freed.Token)
	}
	switch {
	case r.Code == fsm.Written:
		// A put: a new TTL is timed from now; a kept one keeps its
		// deadline, under the lease's new ref if the value changed.
		switch {
		case !n.ready && faultActive("skip-lease-restart"):
		case r.Lease.TTL > 0 && r.Lease.Deadline != 0:
			n.leases.keep(key, r.Lease.Ref(), r.Lease.Deadline)
		default:
			n.leases.set(key, r.Lease, time.Now())
		}
		if d, ok := n.leases.deadline(key); ok && n.ready && d.Before(n.armed) {
			n.kick()
		}
	case r.Waiter == fsm.WaiterGranted,
		r.Code == fsm.Granted, r.Code == fsm.Renewed, r.Code == fsm.Extended:
		// (The skip-lease-restart fault also stops followers from timing
		// leases, so that a new leader that skips the restart inherits no
		// deadlines at all and frees leases early, as the bug would.)
		if n.ready || !faultActive("skip-lease-restart") {
			n.leases.set(key, r.Lease, time.Now())
		}
		if d, ok := n.leases.deadline(key); ok && n.ready && d.Before(n.armed) {
			n.kick()
		}
	}
	if r.Cmd.Waiter != nil {
		delete(n.granting, key)
		owner := r.Cmd.Waiter.Owner
		switch r.Waiter {
		case fsm.WaiterGranted:
			if w := n.waits.take(key, owner); w != nil {
				n.grantedWaiter = true
				w.answer(waitOutcome{granted: true, grant: Grant{Token: r.Lease.Token, TTL: time.Duration(r.Lease.TTL) * time.Millisecond}})
			} else {
				n.abandonedLocked(key, owner, r.Lease.Token)
			}
		case fsm.WaiterRefused:
			if w := n.waits.take(key, owner); w != nil {
				w.answer(waitOutcome{})
			}
		}
	}
	if r.Lease.Token == 0 && !n.granting[key] && n.readyLocked() {
		if w := n.waits.head(key); w != nil {
			// The key is free but someone waits: the entry that freed it was
			// proposed before the waiter queued. Hand it over now.
			n.granting[key] = true
			n.proposeAsync(fsm.Command{Op: fsm.OpGrant, Key: key, Waiter: &fsm.Waiter{Owner: w.owner, TTL: w.ttl}})
		}
	}
}

// abandonedLocked handles a grant made to a waiter that has gone (its wait
// ended or its connection closed while the grant was in flight). If the owner
// has an acquire in progress, that request returns the same grant (the table
// renews a holder's acquire with its token); otherwise the grant is revoked by
// owner and token only, so nothing else is touched.
func (n *Node) abandonedLocked(key, owner string, token uint64) {
	ok := ownerKey{key, owner}
	if n.live[ok] > 0 {
		n.undeliveredLocked(ok, token)
		return
	}
	n.revokeUndeliveredLocked(ok, token)
}

// proposeAsync proposes c without waiting for it; it is used from the apply
// path, which must never block on Raft (submit never does).
func (n *Node) proposeAsync(c fsm.Command) {
	n.batch.submit(c.Encode(nil), func(_ *fsm.Result, err error) {
		if err == nil {
			return
		}
		n.log.Debug("background proposal failed", "op", c.Op, "key", c.Key, "err", err)
		if c.Op == fsm.OpGrant {
			n.mu.Lock()
			delete(n.granting, c.Key)
			n.mu.Unlock()
		}
	})
}

// headWaiterLocked returns the first waiter for key as an fsm.Waiter.
func (n *Node) headWaiterLocked(key string) *fsm.Waiter {
	if w := n.waits.head(key); w != nil {
		return &fsm.Waiter{Owner: w.owner, TTL: w.ttl}
	}
	return nil
}

// waitReady returns nil once this node is a ready leader, or an error
// saying why it is not: another node leads, or ctx ended with no leader.
func (n *Node) waitReady(ctx context.Context) error {
	for {
		n.mu.Lock()
		ready, closed, changed := n.readyLocked(), n.closed, n.changed
		n.mu.Unlock()
		switch {
		case closed:
			return ErrShutdown
		case ready:
			return nil
		}
		lid, addr := n.Leader()
		switch {
		case lid != "" && lid != n.id && addr != "":
			return &NotLeaderError{Leader: lid, LeaderAddr: addr}
		case lid == "" && !n.isMember():
			return ErrNotMember
		}
		// No leader yet, or one whose client address this node has not
		// applied yet (a restarted follower learns the commit index only
		// when the leader next replicates to it): wait, within ctx.
		select {
		case <-changed:
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			if lid != "" && lid != n.id {
				return &NotLeaderError{Leader: lid}
			}
			return fmt.Errorf("%w: %v", ErrNoLeader, ctx.Err())
		}
	}
}
