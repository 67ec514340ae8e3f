package server

import (
	"time"

	"github.com/hashicorp/raft"
)

// The Raft settings a node runs with besides Config's fields. They are
// exported so that the bare-raft baseline of make bench
// (internal/cmd/raftbench) runs on the very values the node does.
const (
	// RaftLogCacheSize is how many of the newest log entries are kept in
	// memory in front of the log store (raft.NewLogCache), so that
	// replicating them to followers does not read the store back.
	RaftLogCacheSize = 512
	// RaftTransportPool is how many idle connections the Raft transport
	// keeps open to each peer (its maxPool).
	RaftTransportPool = 3
	// RaftTransportTimeout bounds each I/O of the Raft transport; an
	// InstallSnapshot gets it scaled by the snapshot's size.
	RaftTransportTimeout = 10 * time.Second
)

// RaftConfig returns the raft.Config of a node configured by cfg:
// raft.DefaultConfig()'s timeouts, cfg's snapshot and trailing-log
// settings, and BatchApplyCh. BatchApplyCh buffers Raft's apply channel, so
// that entries proposed while the leader loop is busy are appended
// together; what it costs, Raft's Apply timeout no longer bounding the
// wait, does not apply here: the node proposes without a timeout and bounds
// the wait by the caller's context (docs/performance.md has the
// measurements). The caller sets LocalID and Logger.
func RaftConfig(cfg Config) *raft.Config {
	rc := raft.DefaultConfig()
	rc.BatchApplyCh = true
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.TrailingLogs = cfg.TrailingLogs
	return rc
}
