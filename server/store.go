package server

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
	"golang.org/x/sys/unix"
)

// The log and stable store is hashicorp/raft-wal: segment files appended
// to, one fsync per batch of entries before Raft counts them (DESIGN.md
// invariant 6). Development builds of fencer used raft-boltdb, whose bbolt
// transactions sync twice; a data directory holding such a store (raft.db)
// is refused, not opened empty beside it (OpenRaftStore).

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

// OpenRaftStore opens the log and stable store in dir, creating it if
// needed. fencerd's nodes and the bare-raft baseline of `make bench` both
// open their stores here. A directory that holds a raft-boltdb store
// (raft.db) is refused: starting beside it would forget the node's term,
// vote and log.
func OpenRaftStore(dir string) (RaftStore, error) { return openRaftStore(dir, 0) }

// openRaftStore is OpenRaftStore with raft-wal's segment size (zero: its
// default; Config.RaftSegmentSize).
func openRaftStore(dir string, segmentSize int) (RaftStore, error) {
	if err := refuseBolt(dir); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, walDir)
	if err := os.MkdirAll(path, 0o700); err != nil {
		return nil, fmt.Errorf("server: opening raft store: %w", err)
	}
	meta := &metadb.BoltMetaDB{}
	size := wal.WithSegmentSize(segmentSize)
	if segmentSize <= 0 {
		size = func(*wal.WAL) {}
	}
	w, err := wal.Open(path, wal.WithMetaStore(meta), wal.WithSegmentFiler(segment.NewFiler(path, walFS())), size)
	if err != nil {
		_ = meta.Close()
		return nil, fmt.Errorf("server: opening raft store: %w", err)
	}
	// raft-wal fsyncs the directory at the first Sync of a segment it
	// created, but not when it opens one an earlier run created and whose
	// name a crash may not have made durable (it recreates a missing tail
	// segment at open, and the run after that appends to it as to an old
	// one). Making every name durable here closes that.
	if err := syncDir(path); err != nil {
		_ = w.Close()
		_ = meta.Close()
		return nil, err
	}
	return walStore{w, meta}, nil
}

// refuseBolt returns an error if dir holds a raft-boltdb store, or if it
// cannot tell: only "does not exist" means absent, as guessing on another
// error (EIO) could start a fresh store beside one that holds this node's
// term, vote and log.
func refuseBolt(dir string) error {
	_, err := os.Stat(filepath.Join(dir, boltFile))
	switch {
	case err == nil:
		return fmt.Errorf("server: data dir %s holds a raft-boltdb log store (%s), written by a development build of fencer; this fencerd reads only raft-wal. Save a snapshot with the build that wrote it (fencer snapshot save) and restore it into a new data dir (fencerd --restore)", dir, boltFile)
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("server: data dir %s: %w", dir, err)
	}
	return nil
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
