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
// transport, the lock table, and the leader's bookkeeping of grants (lease
// timers, wait queues) in grants, which the apply path (applier) shares.
type Node struct {
	cfg    Config
	health healthBook // the members' answers to the leader's probe
	format formatGate // serializes format raises with joins
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
	grants  *grants
	fsm     *applier
	// hadState reports that DataDir held Raft state when the node opened.
	hadState bool
	// openedIndex is the last index of the Raft log when the node opened:
	// once it has applied that far, its table is what it was
	// (FormingReport).
	openedIndex uint64
	// formingSeen is what formation's latest round reached (FormingReport.Seen).
	formingSeen atomic.Pointer[[]string]
	wake        chan struct{} // wakes the expiry loop
	// probe carries liveness probes to the expiry loop (Live); stuckAfter
	// is how long an apply may run before Live fails (tests lower it).
	probe      chan chan struct{}
	stuckAfter time.Duration
	metrics    *metrics
	watches    *watchHub // the retained events and the watches (Watch)
}

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
	if err := refuseBolt(cfg.DataDir); err != nil {
		_ = lock.Close()
		return nil, err
	}
	if err := checkRefused(cfg.DataDir); err != nil {
		_ = lock.Close()
		return nil, err
	}
	id, err := nodeID(cfg.DataDir, cfg.ID)
	if err != nil {
		_ = lock.Close()
		return nil, err
	}
	n := &Node{
		cfg:        cfg,
		id:         id,
		lock:       lock,
		log:        logger.With("node", id),
		table:      fsm.New(),
		stopCh:     make(chan struct{}),
		wake:       make(chan struct{}, 1),
		probe:      make(chan chan struct{}),
		stuckAfter: defaultStuckAfter,
		format:     formatGate{kick: make(chan struct{}, 1)},
		metrics:    newMetrics(),
		latches:    newLatches(),
	}
	n.grants = newGrants(n.table, n.log, cfg.Quotas, cfg.MaxLocks)
	n.grants.maxSessionLocks = cfg.MaxSessionLocks
	n.grants.propose, n.grants.kick = n.proposeAsync, n.kick
	n.watches = newWatchHub(n.table, cfg.WatchWindow, cfg.MaxWatches, cfg.MaxPrefixWatches)
	n.fsm = &applier{table: n.table, grants: n.grants, metrics: n.metrics, watches: n.watches, halted: make(chan error, 1)}
	recorded, err := readClusterID(cfg.DataDir)
	if err != nil {
		_ = lock.Close()
		return nil, err
	}
	n.fsm.id = identity{dir: cfg.DataDir, recorded: recorded,
		onError: func(err error) { n.log.Warn("could not record the cluster ID in the data directory", "err", err) }}
	if err := n.startRaft(); err != nil {
		n.closeStores()
		select {
		case herr := <-n.fsm.halted:
			// Raft says only that no snapshot loaded: say why.
			return nil, herr
		default:
		}
		return nil, err
	}
	// Raft restored its snapshot in startRaft, on this goroutine: one it
	// could not read may have stopped the applier even though an older
	// snapshot then loaded.
	if n.fsm.stopped {
		_ = n.raft.Shutdown().Error()
		n.closeStores()
		return nil, <-n.fsm.halted
	}
	shutdown := func() {
		// Not on the FSM goroutine: Shutdown waits for it. A node that
		// cannot read what it was sent must neither vote nor lead.
		go func() { _ = n.raft.Shutdown().Error() }()
	}
	n.fsm.onHalt.Store(&shutdown)
	if n.fsm.haltSeen.Load() {
		shutdown() // halted before onHalt was set
	}
	n.batch = newBatcher(func(data []byte) raft.ApplyFuture { return n.raft.Apply(data, 0) }, cfg.MaxBatch, 1)
	n.registerNodeGauges()
	n.wg.Add(5)
	go n.formatLoop()
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
	if len(want) > maxPreambleField {
		return "", fmt.Errorf("server: the server ID has %d bytes; at most %d are allowed (every Raft connection names the server it is for)", len(want), maxPreambleField)
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
	rc.Logger = newRaftLogger(n.log, hclog.LevelFromString(cfg.RaftLogLevel))

	store, err := openRaftStore(cfg.DataDir, cfg.RaftSegmentSize)
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
		// so port 0 works (tests); a name is advertised as it is, never
		// resolved once for good (stream.go).
		var advAddr net.Addr
		name, isName := advertisedName(cfg.RaftAdvertise)
		if isName {
			advAddr = name
		} else if cfg.RaftAdvertise != "" {
			a, err := net.ResolveTCPAddr("tcp", cfg.RaftAdvertise)
			if err != nil {
				return fmt.Errorf("server: raft advertise address: %w", err)
			}
			advAddr = a
		}
		var stream raft.StreamLayer
		var err error
		if cfg.RaftTLS != nil {
			stream, err = newTLSStream(cfg.RaftAddr, advAddr, cfg.RaftTLS)
		} else {
			stream, err = newTCPStream(cfg.RaftAddr, advAddr)
		}
		if err != nil {
			return fmt.Errorf("server: raft transport: %w", err)
		}
		if a, ok := stream.Addr().(*net.TCPAddr); ok && (a.IP == nil || a.IP.IsUnspecified()) {
			stream.Close()
			return fmt.Errorf("server: raft transport: the listener's address %s cannot be advertised: give --raft-advertise", a)
		}
		// Every connection says which server and cluster it is for
		// (peerid.go).
		// The cluster is the applied ID, or, until the log replays after
		// a restart, the one the data directory recorded when it was
		// applied: a restarted server must not take another cluster's
		// connection in the meantime.
		onDisk := n.fsm.id.recorded
		stream = newIDStream(stream, n.id, func() string {
			if id := n.table.ClusterID(); id != "" {
				return id
			}
			return onDisk
		}, n.log)
		n.trans = idTransport{raft.NewNetworkTransportWithLogger(stream, RaftTransportPool, RaftTransportTimeout, rc.Logger.Named("transport"))}
	}
	trans := n.trans

	existing, err := raft.HasExistingState(logs, store, snaps)
	if err != nil {
		return fmt.Errorf("server: reading raft state: %w", err)
	}
	n.hadState = existing
	if n.openedIndex, err = logs.LastIndex(); err != nil {
		return fmt.Errorf("server: reading raft state: %w", err)
	}
	switch {
	case existing:
		if cfg.Join && cfg.CheckCluster != nil && n.fsm.id.recorded != "" {
			// A node of one cluster given another's addresses must not
			// start beside it as a second cluster.
			if err := cfg.CheckCluster(n.fsm.id.recorded); err != nil {
				return err
			}
		}
		if cfg.Join {
			n.log.Info("restarting from existing state; join addresses are not needed", "cluster_id", n.fsm.id.recorded)
		}
	case cfg.Join:
		if cfg.CheckJoin != nil {
			if err := cfg.CheckJoin(n.id); err != nil {
				return err
			}
		}
		if cfg.BootstrapExpect > 0 {
			// No vote before formation has checked the node (votegate.go).
			n.trans = newVoteGate(n.trans)
			trans = n.trans
			n.log.Info("no state yet: forming a cluster of the expected servers, or joining one that formed", "bootstrap_expect", cfg.BootstrapExpect)
		} else {
			n.log.Info("no state yet: waiting to be added to a cluster")
		}
	default:
		conf := raft.Configuration{Servers: []raft.Server{{ID: rc.LocalID, Address: trans.LocalAddr()}}}
		if err := raft.BootstrapCluster(rc, logs, store, snaps, trans, conf); err != nil {
			return fmt.Errorf("server: bootstrap: %w", err)
		}
		n.log.Info("bootstrapped a new one-node cluster", "data_dir", cfg.DataDir)
	}
	r, err := raft.NewRaft(rc, n.fsm, logs, store, snaps, trans)
	if err != nil {
		return fmt.Errorf("server: starting raft: %w", err)
	}
	n.raft = r
	n.grants.raft = r
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
	if n.grants.isClosed() {
		return nil
	}
	n.handOff()
	if !n.grants.close() {
		return nil
	}
	close(n.stopCh)
	n.watches.close()
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

// proposeAsync proposes c without waiting for it; it is used from the apply
// path, which must never block on Raft (submit never does).
func (n *Node) proposeAsync(c fsm.Command) {
	n.batch.submit(c.Encode(nil), func(_ *fsm.Result, err error) {
		if err == nil {
			return
		}
		n.log.Debug("background proposal failed", "op", c.Op, "key", c.Key, "err", err)
		if c.Op == fsm.OpGrant {
			n.grants.grantFailed(c.Key)
		}
	})
}

// waitReady returns nil once this node is a ready leader, or an error
// saying why it is not: another node leads, or ctx ended with no leader.
func (n *Node) waitReady(ctx context.Context) error {
	for {
		ready, closed, changed := n.grants.state()
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
