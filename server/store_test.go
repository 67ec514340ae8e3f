package server

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"
)

// A new data directory gets the WAL log store.
func TestNewDataDirUsesWAL(t *testing.T) {
	dir := t.TempDir()
	n := openNode(t, dir)
	mustAcquire(t, n, "k", "o", time.Minute)
	assert.DirExists(t, filepath.Join(dir, walDir))
}

// A data directory with a raft-boltdb store (raft.db, from a development
// build) is refused with a message that says what to do, and left as it
// was: no WAL is started beside it.
func TestBoltDataDirIsRefused(t *testing.T) {
	dir := t.TempDir()
	db, err := bbolt.Open(filepath.Join(dir, boltFile), 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bbolt.Tx) error {
		_, err := tx.CreateBucket([]byte("logs"))
		return err
	}))
	require.NoError(t, db.Close())

	cfg := DefaultConfig()
	cfg.DataDir, cfg.RaftAddr = dir, "127.0.0.1:0"
	_, err = Open(cfg)
	require.Error(t, err)
	assert.ErrorContains(t, err, "holds a raft-boltdb log store (raft.db)")
	assert.ErrorContains(t, err, "fencer snapshot save")
	assert.NoDirExists(t, filepath.Join(dir, walDir), "nothing started beside it")
	_, err = OpenRaftStore(dir)
	assert.ErrorContains(t, err, "raft-boltdb")
}

// A second node on the same data directory stops at once with
// ErrDataDirInUse.
func TestDataDirInUse(t *testing.T) {
	dir := t.TempDir()
	openNode(t, dir)
	cfg := DefaultConfig()
	cfg.DataDir, cfg.RaftAddr = dir, "127.0.0.1:0"
	start := time.Now()
	_, err := Open(cfg)
	assert.ErrorIs(t, err, ErrDataDirInUse)
	assert.Less(t, time.Since(start), 2*time.Second)
}

// A follower cuts a conflicting log tail (DeleteRange of a suffix) after a
// leader change; the store must still read its log after a restart.
// raft-wal v0.4.0 failed this ("sealed segment has no index block", and
// Raft panics at start); v0.4.1 fixed it.
func TestWALReadsAfterTailTruncationAndRestart(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenRaftStore(dir)
	require.NoError(t, err)
	var logs []*raft.Log
	for i := uint64(1); i <= 10; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: []byte("entry")})
	}
	require.NoError(t, s.StoreLogs(logs))
	require.NoError(t, s.DeleteRange(9, 10))
	require.NoError(t, s.StoreLog(&raft.Log{Index: 9, Term: 2, Type: raft.LogCommand, Data: []byte("new")}))
	require.NoError(t, s.Close())

	s, err = OpenRaftStore(dir)
	require.NoError(t, err)
	defer s.Close()
	var l raft.Log
	require.NoError(t, s.GetLog(5, &l))
	assert.Equal(t, []byte("entry"), l.Data)
	require.NoError(t, s.GetLog(9, &l))
	assert.Equal(t, uint64(2), l.Term)
	last, err := s.LastIndex()
	require.NoError(t, err)
	assert.Equal(t, uint64(9), last)
	require.NoError(t, s.StoreLog(&raft.Log{Index: 10, Term: 2, Type: raft.LogCommand, Data: []byte("more")}))
}
