package main

import (
	"fmt"
	"os"
	"time"

	"github.com/fencerlock/fencer/server"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// The settings of server/node.go's startRaft that have no exported source.
// They are mirrored here; settings_test.go fails when startRaft's differ.
const (
	// logCacheSize is startRaft's raft.NewLogCache size.
	logCacheSize = 512
	// transportPool and transportTimeout are startRaft's
	// raft.NewTCPTransportWithLogger maxPool and timeout.
	transportPool    = 3
	transportTimeout = 10 * time.Second
)

// settings are what a baseline run is configured with; they are printed in
// its result line.
type settings struct {
	EntryBytes        int
	BatchApplyCh      bool
	MaxAppendEntries  int
	LogCache          int
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	SnapshotRetain    int
}

// defaultSettings are fencerd's: raft.DefaultConfig() changed as startRaft
// changes it, with server.DefaultConfig()'s snapshot settings.
func defaultSettings() settings {
	rc := raft.DefaultConfig()
	sc := server.DefaultConfig()
	return settings{
		// About the size of one of fencer's acquire entries.
		EntryBytes:        64,
		BatchApplyCh:      rc.BatchApplyCh,
		MaxAppendEntries:  rc.MaxAppendEntries,
		LogCache:          logCacheSize,
		SnapshotThreshold: sc.SnapshotThreshold,
		SnapshotInterval:  sc.SnapshotInterval,
		SnapshotRetain:    sc.SnapshotRetain,
	}
}

// node is one raft server of the baseline.
type node struct {
	raft     *raft.Raft
	store    *raftboltdb.BoltStore
	trans    *raft.NetworkTransport
	settings settings
	voters   int
}

// open starts a node the way server.Node.startRaft does, bootstrapping the
// given voters if dir holds no state yet.
func open(id, dir, addr string, voters []raft.Server, s settings) (*node, error) {
	if s.EntryBytes < 8 {
		return nil, fmt.Errorf("--entry-bytes must be at least 8, got %d", s.EntryBytes)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(id)
	rc.SnapshotThreshold = s.SnapshotThreshold
	rc.SnapshotInterval = s.SnapshotInterval
	rc.BatchApplyCh = s.BatchApplyCh
	rc.MaxAppendEntries = s.MaxAppendEntries
	rc.Logger = hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Warn, Output: os.Stderr})

	// Options.NoSync stays false: every append is fsynced, as in fencerd.
	store, err := raftboltdb.New(raftboltdb.Options{Path: dataPath(dir), BoltOptions: &bbolt.Options{Timeout: time.Second}})
	if err != nil {
		return nil, fmt.Errorf("opening raft store: %w", err)
	}
	n := &node{store: store, settings: s, voters: len(voters)}
	var logs raft.LogStore = store
	if s.LogCache > 0 {
		if logs, err = raft.NewLogCache(s.LogCache, store); err != nil {
			store.Close()
			return nil, err
		}
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, s.SnapshotRetain, rc.Logger.Named("snapshot"))
	if err != nil {
		store.Close()
		return nil, err
	}
	trans, err := raft.NewTCPTransportWithLogger(addr, nil, transportPool, transportTimeout, rc.Logger.Named("transport"))
	if err != nil {
		store.Close()
		return nil, err
	}
	n.trans = trans
	existing, err := raft.HasExistingState(logs, store, snaps)
	if err != nil {
		n.closeStores()
		return nil, err
	}
	if !existing {
		// Every node bootstraps the same configuration, which raft allows.
		if err := raft.BootstrapCluster(rc, logs, store, snaps, trans, raft.Configuration{Servers: voters}); err != nil {
			n.closeStores()
			return nil, fmt.Errorf("bootstrap: %w", err)
		}
	}
	r, err := raft.NewRaft(rc, &counter{}, logs, store, snaps, trans)
	if err != nil {
		n.closeStores()
		return nil, err
	}
	n.raft = r
	return n, nil
}

func (n *node) close() error {
	err := n.raft.Shutdown().Error()
	n.closeStores()
	return err
}

func (n *node) closeStores() {
	_ = n.trans.Close()
	_ = n.store.Close()
}
