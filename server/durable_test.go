package server

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// openFails opens a node on dir and returns the error it must stop with.
func openFails(t *testing.T, dir string) error {
	t.Helper()
	cfg := DefaultConfig()
	cfg.DataDir, cfg.RaftAddr, cfg.RaftLogLevel = dir, "127.0.0.1:0", "error"
	n, err := Open(cfg)
	if err == nil {
		_ = n.Close()
		t.Fatal("Open succeeded on a damaged data directory")
	}
	return err
}

// snapshotOnDisk fills a node in dir, snapshots it and closes it; it
// returns the snapshot's directory.
func snapshotOnDisk(t *testing.T, dir string) string {
	t.Helper()
	n := openNode(t, dir)
	for i := range 20 {
		mustAcquire(t, n, fmt.Sprintf("k%d", i), "o", time.Hour)
	}
	require.NoError(t, n.raft.Snapshot().Error())
	require.NoError(t, n.Close())
	snaps, err := os.ReadDir(filepath.Join(dir, snapshotsDir))
	require.NoError(t, err)
	require.NotEmpty(t, snaps)
	return filepath.Join(dir, snapshotsDir, snaps[len(snaps)-1].Name())
}

// The node ID is the Raft state's owner: without it beside the state the
// node refuses to start, naming the file, rather than make up a new ID.
func TestMissingNodeIDBesideRaftStateIsDamage(t *testing.T) {
	dir := t.TempDir()
	n := openNode(t, dir)
	mustAcquire(t, n, "k", "o", time.Hour)
	require.NoError(t, n.Close())
	path := filepath.Join(dir, nodeIDFile)
	require.NoError(t, os.Remove(path))

	err := openFails(t, dir)
	assert.ErrorIs(t, err, ErrDamaged)
	assert.ErrorContains(t, err, path)
	assert.NoFileExists(t, path, "no new ID was made up")
}

// A snapshot whose data no longer matches its checksum stops the node,
// naming the file; the next start is not quietly from an older snapshot.
func TestSnapshotChecksumMismatchIsDamage(t *testing.T) {
	dir := t.TempDir()
	snap := snapshotOnDisk(t, dir)
	state := filepath.Join(snap, "state.bin")
	b, err := os.ReadFile(state)
	require.NoError(t, err)
	b[len(b)/2] ^= 0xff
	require.NoError(t, os.WriteFile(state, b, 0o600))

	err = openFails(t, dir)
	assert.ErrorIs(t, err, ErrDamaged)
	assert.ErrorContains(t, err, state)
}

// Snapshot metadata that does not parse is damage; a snapshot directory
// without metadata is a snapshot a crash cut short, and is skipped.
func TestSnapshotMetadata(t *testing.T) {
	t.Run("garbled", func(t *testing.T) {
		dir := t.TempDir()
		snap := snapshotOnDisk(t, dir)
		meta := filepath.Join(snap, "meta.json")
		require.NoError(t, os.WriteFile(meta, []byte(`{"ID": `), 0o600))
		err := openFails(t, dir)
		assert.ErrorIs(t, err, ErrDamaged)
		assert.ErrorContains(t, err, meta)
	})
	t.Run("cut short", func(t *testing.T) {
		dir := t.TempDir()
		snapshotOnDisk(t, dir)
		require.NoError(t, os.Mkdir(filepath.Join(dir, snapshotsDir, "9-999999-1"), 0o700))
		n := openNode(t, dir)
		st, held, err := n.Status(ctxT(t), "k3")
		require.NoError(t, err)
		assert.True(t, held)
		assert.NotZero(t, st.Token)
	})
}

// checkRecoverable against a log that begins at index 101: it needs a
// snapshot that ends at 100 or later.
func TestLogNeedsItsSnapshot(t *testing.T) {
	logs := raft.NewInmemStore()
	require.NoError(t, logs.SetUint64([]byte("CurrentTerm"), 1))
	for i := uint64(101); i <= 120; i++ {
		require.NoError(t, logs.StoreLog(&raft.Log{Index: i, Term: 1, Type: raft.LogCommand}))
	}
	snapshotAt := func(t *testing.T, index uint64) (string, raft.SnapshotStore) {
		dir := t.TempDir()
		store, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hclog.NewNullLogger())
		require.NoError(t, err)
		snaps := durableSnapshots{store, filepath.Join(dir, snapshotsDir)}
		if index > 0 {
			sink, err := snaps.Create(raft.SnapshotVersionMax, index, 1, raft.Configuration{}, 1, nil)
			require.NoError(t, err)
			_, err = io.WriteString(sink, "state")
			require.NoError(t, err)
			require.NoError(t, sink.Close())
		}
		return dir, snaps
	}
	for _, tc := range []struct {
		snapshot uint64
		ok       bool
	}{{0, false}, {50, false}, {99, false}, {100, true}, {110, true}, {130, true}} {
		t.Run(fmt.Sprint(tc.snapshot), func(t *testing.T) {
			dir, snaps := snapshotAt(t, tc.snapshot)
			err := checkRecoverable(dir, logs, logs, snaps)
			if tc.ok {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, ErrDamaged)
			assert.ErrorContains(t, err, filepath.Join(dir, snapshotsDir))
			assert.ErrorContains(t, err, "begins at index 101")
		})
	}
	// An empty log needs no snapshot, and a log from index 1 none either.
	dir, snaps := snapshotAt(t, 0)
	empty := raft.NewInmemStore()
	assert.NoError(t, checkRecoverable(dir, empty, empty, snaps))
	whole := raft.NewInmemStore()
	require.NoError(t, whole.SetUint64([]byte("CurrentTerm"), 1))
	require.NoError(t, whole.StoreLog(&raft.Log{Index: 1, Term: 1}))
	assert.NoError(t, checkRecoverable(dir, whole, whole, snaps))
}

// The saved term is never below the term of the last entry or of the
// newest snapshot: if it is, the store that holds the term and the vote
// was lost or replaced beside the rest.
func TestSavedTermBelowTheLogIsDamage(t *testing.T) {
	dir := t.TempDir()
	store, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hclog.NewNullLogger())
	require.NoError(t, err)
	snaps := durableSnapshots{store, filepath.Join(dir, snapshotsDir)}
	logs := raft.NewInmemStore()
	require.NoError(t, logs.StoreLog(&raft.Log{Index: 1, Term: 3}))
	require.NoError(t, logs.SetUint64([]byte("CurrentTerm"), 2))
	err = checkRecoverable(dir, logs, logs, snaps)
	assert.ErrorIs(t, err, ErrDamaged)
	assert.ErrorContains(t, err, "saved term 2 is below term 3")
	require.NoError(t, logs.SetUint64([]byte("CurrentTerm"), 3))
	assert.NoError(t, checkRecoverable(dir, logs, logs, snaps))

	// A snapshot of term 5 with an empty log and no saved term: the log
	// store was replaced by an empty one.
	sink, err := snaps.Create(raft.SnapshotVersionMax, 10, 5, raft.Configuration{}, 1, nil)
	require.NoError(t, err)
	_, err = io.WriteString(sink, "state")
	require.NoError(t, err)
	require.NoError(t, sink.Close())
	fresh := raft.NewInmemStore()
	assert.ErrorIs(t, checkRecoverable(dir, fresh, fresh, snaps), ErrDamaged)
}

// A node whose log store was deleted while its snapshots and node ID
// stayed refuses to start: it would restore the snapshot with no term and
// no vote, and could vote twice in a term.
func TestLostLogStoreBesideSnapshotsIsDamage(t *testing.T) {
	dir := t.TempDir()
	snapshotOnDisk(t, dir)
	require.NoError(t, os.RemoveAll(filepath.Join(dir, walDir)))
	err := openFails(t, dir)
	assert.ErrorIs(t, err, ErrDamaged)
	assert.ErrorContains(t, err, filepath.Join(dir, walDir))
}
