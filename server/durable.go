package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/fencerlock/fencer/internal/atomicfile"
	"github.com/hashicorp/raft"
)

// What a node writes survives a power cut only once it is fsynced, and a
// new file or directory only once the directory that names it is fsynced
// too. Each file below is made durable before anything that relies on it:
//
//   - the node ID is written to a temporary file, fsynced, renamed into
//     place, and the data directory fsynced, before any Raft state exists;
//   - the stores' files and directories (wal/, snapshots/) are made
//     durable by an fsync of the data directory once they are opened;
//   - raft's snapshot store fsyncs a snapshot's files and renames its
//     directory into place, but never fsyncs that directory itself, so a
//     power cut could keep the snapshot's name and lose its files; the
//     node fsyncs it when the snapshot closes, before Raft compacts the log
//     the snapshot replaces (durableSnapshots).
//
// Losing what was not fsynced is normal recovery. What was fsynced and is
// gone or wrong (checkRecoverable, nodeID) is damage: the node refuses to
// start, naming the file, rather than rejoin with less than it promised.

// snapshotsDir is where raft's file snapshot store keeps snapshots inside
// the data directory.
const snapshotsDir = "snapshots"

// ErrDamaged means the data directory lost or changed something that had
// been made durable; the error names the file. The node does not start:
// docs/operations.md says what to do.
var ErrDamaged = errors.New("server: damaged data directory")

func damaged(path, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s (see docs/operations.md, \"A damaged data directory\")", ErrDamaged, path, fmt.Sprintf(format, args...))
}

// syncDir fsyncs a directory, making the names in it durable.
func syncDir(dir string) error {
	if err := atomicfile.SyncDir(dir); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	return nil
}

// makeDataDir creates the data directory if it is missing, and makes the
// name of every directory it created durable.
func makeDataDir(dir string) error {
	var missing []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		} else if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("server: data dir: %w", err)
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("server: data dir: %w", err)
	}
	for _, d := range missing {
		if err := syncDir(filepath.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}

// hasRaftData reports whether dir holds any Raft state: a log store or a
// snapshot directory with something in it.
func hasRaftData(dir string) (bool, error) {
	for _, name := range []string{walDir, boltFile} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return true, nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return false, fmt.Errorf("server: data dir %s: %w", dir, err)
		}
	}
	entries, err := os.ReadDir(filepath.Join(dir, snapshotsDir))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("server: data dir %s: %w", dir, err)
	}
	return len(entries) > 0, nil
}

// durableSnapshots is raft's file snapshot store with each new snapshot's
// directory fsynced before the snapshot counts as taken.
type durableSnapshots struct {
	*raft.FileSnapshotStore
	dir string // the snapshots directory
}

func (s durableSnapshots) Create(version raft.SnapshotVersion, index, term uint64,
	configuration raft.Configuration, configurationIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	sink, err := s.FileSnapshotStore.Create(version, index, term, configuration, configurationIndex, trans)
	if err != nil {
		return nil, err
	}
	return &durableSink{SnapshotSink: sink, dir: s.dir}, nil
}

type durableSink struct {
	raft.SnapshotSink
	dir    string
	synced bool // Close may be called again (the FSM's Persist closes too)
}

// Close fsyncs the snapshot's directory while it still has its temporary
// name (raft created both its files in Create; its Close only rewrites
// them), then lets raft finish: it fsyncs the files, renames the directory
// into place and fsyncs the parent. So once the name is durable, so are the
// names inside, and Raft compacts the log only after Close returns nil.
func (s *durableSink) Close() error {
	if !s.synced {
		if err := syncDir(filepath.Join(s.dir, s.ID()+".tmp")); err != nil {
			_ = s.SnapshotSink.Cancel()
			return err
		}
		s.synced = true
	}
	return s.SnapshotSink.Close()
}

// checkRecoverable refuses a data directory whose Raft state cannot be
// restored as it was made durable: a snapshot whose data fails its
// checksum or whose metadata does not read, or a log that begins after the
// newest snapshot ends (compacted on the strength of a snapshot that is
// gone). A snapshot directory without metadata is a snapshot a crash
// interrupted before it counted; raft skips it, and so does this check.
func checkRecoverable(dataDir string, logs raft.LogStore, stable raft.StableStore, snaps raft.SnapshotStore) error {
	dir := filepath.Join(dataDir, snapshotsDir)
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("server: data dir: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() || strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		meta := filepath.Join(dir, e.Name(), "meta.json")
		b, err := os.ReadFile(meta)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return damaged(meta, "%v", err)
		}
		var m raft.SnapshotMeta
		if err := json.Unmarshal(b, &m); err != nil {
			return damaged(meta, "snapshot metadata does not read: %v", err)
		}
	}
	metas, err := snaps.List()
	if err != nil {
		return fmt.Errorf("server: listing snapshots: %w", err)
	}
	var snapIndex, snapTerm uint64
	if len(metas) > 0 {
		newest := metas[0]
		_, rc, err := snaps.Open(newest.ID)
		if err != nil {
			return damaged(filepath.Join(dir, newest.ID, "state.bin"), "snapshot at index %d does not open: %v", newest.Index, err)
		}
		_ = rc.Close()
		snapIndex, snapTerm = newest.Index, newest.Term
	}
	first, err := logs.FirstIndex()
	if err != nil {
		return fmt.Errorf("server: reading the raft log: %w", err)
	}
	last, err := logs.LastIndex()
	if err != nil {
		return fmt.Errorf("server: reading the raft log: %w", err)
	}
	// Raft saves a term before it stores an entry or a snapshot of it; a
	// smaller saved term means the store that holds it (with the vote) was
	// lost or replaced while the rest stayed.
	term, err := stable.GetUint64([]byte("CurrentTerm"))
	if err != nil {
		return fmt.Errorf("server: reading the raft term: %w", err)
	}
	top := snapTerm
	if last > 0 {
		var l raft.Log
		if err := logs.GetLog(last, &l); err != nil {
			return fmt.Errorf("server: reading the raft log: %w", err)
		}
		top = max(top, l.Term)
	}
	if term < top {
		return damaged(filepath.Join(dataDir, walDir), "the saved term %d is below term %d of the log or snapshot: the store of the term and vote was lost or replaced", term, top)
	}
	if last > snapIndex && first > snapIndex+1 {
		what := fmt.Sprintf("no snapshot, and the raft log begins at index %d", first)
		if len(metas) > 0 {
			what = fmt.Sprintf("the newest snapshot ends at index %d, and the raft log begins at index %d", snapIndex, first)
		}
		return damaged(dir, "%s: the entries between are gone", what)
	}
	return nil
}
