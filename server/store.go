package server

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
	"go.etcd.io/bbolt"
	"golang.org/x/sys/unix"
)

// Log stores. Both fsync every append before Raft counts it (DESIGN.md
// invariant 6); they differ in how often:
//
//   - LogStoreWAL, hashicorp/raft-wal: segment files appended to, one fsync
//     per batch of entries. The default for a new data directory.
//   - LogStoreBolt, raft-boltdb/v2: a bbolt B+tree, whose transactions sync
//     twice (the pages, then the meta page). fencer's store before raft-wal;
//     a data directory that has one goes on using it.
//
// One fsync instead of two is most of a commit's latency with one node, and
// half of it with three (the leader syncs before it replicates, then the
// followers sync): docs/performance.md has the measurements.
const (
	LogStoreWAL  = "wal"
	LogStoreBolt = "bolt"
)

// boltFile and walDir are the stores' places in the data directory.
const (
	boltFile = "raft.db"
	walDir   = "wal"
	lockFile = "LOCK"
)

// RaftStore is a Raft log and stable store that can be closed.
type RaftStore interface {
	raft.LogStore
	raft.StableStore
	io.Closer
}

// StoreKind returns the log store a data directory uses: the one it already
// has, or want ("" meaning LogStoreWAL) for a new one. Asking for one kind
// in a directory that has the other is an error: the log is not converted.
func StoreKind(dir, want string) (string, error) {
	_, errBolt := os.Stat(filepath.Join(dir, boltFile))
	_, errWAL := os.Stat(filepath.Join(dir, walDir))
	// Only "does not exist" means absent: guessing on another error (EIO)
	// could start a fresh store beside one that holds this node's term,
	// vote and log.
	for _, err := range []error{errBolt, errWAL} {
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("server: data dir %s: %w", dir, err)
		}
	}
	have := ""
	switch {
	case errBolt == nil && errWAL == nil:
		return "", fmt.Errorf("server: data dir %s has both a %s and a %s store", dir, boltFile, walDir)
	case errBolt == nil:
		have = LogStoreBolt
	case errWAL == nil:
		have = LogStoreWAL
	}
	switch {
	case want != "" && want != LogStoreWAL && want != LogStoreBolt:
		return "", invalid("log store %q is not %q or %q", want, LogStoreWAL, LogStoreBolt)
	case have != "" && want != "" && want != have:
		return "", fmt.Errorf("server: data dir %s holds a %s log store, not %s; it is not converted (start with an empty data dir and join, or restore a snapshot)", dir, have, want)
	case have != "":
		return have, nil
	case want == "":
		return LogStoreWAL, nil
	}
	return want, nil
}

// OpenRaftStore opens the log and stable store of the given kind in dir,
// creating it if needed. fencerd's nodes and the bare-raft baseline of
// `make bench` both open their stores here.
func OpenRaftStore(dir, kind string) (RaftStore, error) {
	switch kind {
	case LogStoreBolt:
		path := filepath.Join(dir, boltFile)
		s, err := raftboltdb.New(raftboltdb.Options{Path: path, BoltOptions: &bbolt.Options{Timeout: time.Second}})
		if errors.Is(err, bbolt.ErrTimeout) {
			return nil, fmt.Errorf("%w: %s is locked by another process", ErrDataDirInUse, path)
		}
		if err != nil {
			return nil, fmt.Errorf("server: opening raft store: %w", err)
		}
		return s, nil
	case LogStoreWAL:
		path := filepath.Join(dir, walDir)
		if err := os.MkdirAll(path, 0o700); err != nil {
			return nil, fmt.Errorf("server: opening raft store: %w", err)
		}
		meta := &metadb.BoltMetaDB{}
		w, err := wal.Open(path, wal.WithMetaStore(meta), wal.WithSegmentFiler(segment.NewFiler(path, walFS())))
		if err != nil {
			_ = meta.Close()
			return nil, fmt.Errorf("server: opening raft store: %w", err)
		}
		// raft-wal fsyncs the directory at the first Sync of a segment it
		// created, but not when it opens one an earlier run created and
		// whose name a crash may not have made durable (it recreates a
		// missing tail segment at open, and the run after that appends to
		// it as to an old one). Making every name durable here closes that.
		if err := syncDir(path); err != nil {
			_ = w.Close()
			_ = meta.Close()
			return nil, err
		}
		return walStore{w, meta}, nil
	}
	return nil, invalid("log store %q is not %q or %q", kind, LogStoreWAL, LogStoreBolt)
}

// walStore makes sure Close closes the WAL's meta database too: raft-wal
// v0.4.0's Close left it open (a reopen in the same process then waited on
// bbolt's file lock forever). v0.4.2 closes it itself; a second close does
// nothing.
type walStore struct {
	*wal.WAL
	meta *metadb.BoltMetaDB
}

func (s walStore) Close() error {
	return errors.Join(s.WAL.Close(), s.meta.Close())
}

// lockDataDir takes an exclusive lock on dir for this process, so that a
// second fencerd on the same directory stops with ErrDataDirInUse instead
// of writing the same log. The lock goes when the returned file is closed
// or the process ends.
func lockDataDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("server: data dir lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is locked by another process", ErrDataDirInUse, dir)
		}
		return nil, fmt.Errorf("server: data dir lock: %w", err)
	}
	return f, nil
}
