package main

import (
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/fencerlock/fencer/server"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// settings are what a baseline node runs with; they are printed in its
// result line.
type settings struct {
	EntryBytes int
	// LogCache is the raft.NewLogCache size (0: none).
	LogCache int
	// RaftSet are raft.Config assignments, "Field=value", applied in order
	// to the node's (server.RaftConfig with server.DefaultConfig()).
	RaftSet []string
}

// defaultSettings are fencerd's: the baseline is built from the tree it
// measures, so it runs on that tree's server.RaftConfig and
// server.RaftLogCacheSize.
func defaultSettings() settings {
	return settings{
		EntryBytes: 64, // about one of fencer's acquire entries
		LogCache:   server.RaftLogCacheSize,
	}
}

// effectiveRaftSet is RaftSet with each field's last assignment only, in
// the order the fields were first set.
func (s settings) effectiveRaftSet() []string {
	var out []string
	at := map[string]int{}
	for _, a := range s.RaftSet {
		field, _, _ := strings.Cut(a, "=")
		if i, ok := at[field]; ok {
			out[i] = a
			continue
		}
		at[field] = len(out)
		out = append(out, a)
	}
	return out
}

// raftConfig builds the node's raft.Config from s.
func (s settings) raftConfig(id string) (*raft.Config, error) {
	rc := server.RaftConfig(server.DefaultConfig())
	rc.LocalID = raft.ServerID(id)
	for _, a := range s.RaftSet {
		field, value, ok := strings.Cut(a, "=")
		if !ok {
			return nil, fmt.Errorf("--raft-set %q: want Field=value", a)
		}
		if err := setField(rc, field, value); err != nil {
			return nil, fmt.Errorf("--raft-set %q: %w", a, err)
		}
	}
	rc.Logger = hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Warn, Output: os.Stderr})
	return rc, raft.ValidateConfig(rc)
}

var durationType = reflect.TypeFor[time.Duration]()

// setField sets rc's field to value: a bool, an integer or a duration.
func setField(rc *raft.Config, field, value string) error {
	f := reflect.ValueOf(rc).Elem().FieldByName(field)
	if !f.IsValid() || !f.CanSet() {
		return fmt.Errorf("raft.Config has no field %s", field)
	}
	switch {
	case f.Type() == durationType:
		d, err := time.ParseDuration(value)
		if err != nil {
			return err
		}
		f.SetInt(int64(d))
	case f.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(value)
		if err != nil {
			return err
		}
		f.SetBool(b)
	case f.CanInt():
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil || f.OverflowInt(n) {
			return fmt.Errorf("%q is not a %s", value, f.Type())
		}
		f.SetInt(n)
	case f.CanUint():
		n, err := strconv.ParseUint(value, 10, 64)
		if err != nil || f.OverflowUint(n) {
			return fmt.Errorf("%q is not a %s", value, f.Type())
		}
		f.SetUint(n)
	default:
		return fmt.Errorf("raft.Config.%s is a %s, which --raft-set cannot set", field, f.Type())
	}
	return nil
}

// node is one raft server of the baseline.
type node struct {
	raft     *raft.Raft
	store    server.RaftStore
	trans    *raft.NetworkTransport
	settings settings
	config   *raft.Config
	voters   int
}

// open starts a node the way server.Node.startRaft does, bootstrapping the
// given voters if dir holds no state yet.
func open(id, dir, addr string, voters []raft.Server, s settings) (*node, error) {
	if s.EntryBytes < 8 {
		return nil, fmt.Errorf("--entry-bytes must be at least 8, got %d", s.EntryBytes)
	}
	rc, err := s.raftConfig(id)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	// The store fencerd opens, the same way (every append fsynced).
	store, err := server.OpenRaftStore(dir)
	if err != nil {
		return nil, fmt.Errorf("opening raft store: %w", err)
	}
	n := &node{store: store, settings: s, config: rc, voters: len(voters)}
	var logs raft.LogStore = store
	if s.LogCache > 0 {
		if logs, err = raft.NewLogCache(s.LogCache, store); err != nil {
			store.Close()
			return nil, err
		}
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, server.DefaultConfig().SnapshotRetain, rc.Logger.Named("snapshot"))
	if err != nil {
		store.Close()
		return nil, err
	}
	trans, err := raft.NewTCPTransportWithLogger(addr, nil, server.RaftTransportPool, server.RaftTransportTimeout, rc.Logger.Named("transport"))
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
