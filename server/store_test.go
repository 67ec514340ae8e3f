package server

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A new data directory gets the WAL log store.
func TestNewDataDirUsesWAL(t *testing.T) {
	dir := t.TempDir()
	n := openNode(t, dir)
	mustAcquire(t, n, "k", "o", time.Minute)
	assert.DirExists(t, filepath.Join(dir, walDir))
	assert.NoFileExists(t, filepath.Join(dir, boltFile))
}

// A data directory with a bolt store (fencer's store before raft-wal) goes
// on using it, with its locks and tokens; it is not converted.
func TestBoltDataDirKeepsItsStore(t *testing.T) {
	dir := t.TempDir()
	n := openNode(t, dir, func(c *Config) { c.LogStore = LogStoreBolt })
	g := mustAcquire(t, n, "k", "o", time.Hour)
	require.NoError(t, n.Close())
	require.FileExists(t, filepath.Join(dir, boltFile))

	n = openNode(t, dir) // LogStore left empty: whatever the directory has
	st, held, err := n.Status(ctxT(t), "k")
	require.NoError(t, err)
	require.True(t, held)
	assert.Equal(t, g.Token, st.Token)
	assert.Greater(t, mustAcquire(t, n, "k2", "o", time.Minute).Token, g.Token)
	require.NoError(t, n.Close())
	assert.NoDirExists(t, filepath.Join(dir, walDir), "not converted")

	cfg := DefaultConfig()
	cfg.DataDir, cfg.RaftAddr, cfg.LogStore = dir, "127.0.0.1:0", LogStoreWAL
	_, err = Open(cfg)
	assert.ErrorContains(t, err, "holds a bolt log store, not wal")
}

// A second node on the same data directory stops at once with
// ErrDataDirInUse, whichever store it has.
func TestDataDirInUse(t *testing.T) {
	for _, kind := range []string{LogStoreWAL, LogStoreBolt} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			openNode(t, dir, func(c *Config) { c.LogStore = kind })
			cfg := DefaultConfig()
			cfg.DataDir, cfg.RaftAddr = dir, "127.0.0.1:0"
			start := time.Now()
			_, err := Open(cfg)
			assert.ErrorIs(t, err, ErrDataDirInUse)
			assert.Less(t, time.Since(start), 2*time.Second)
		})
	}
}

func TestStoreKind(t *testing.T) {
	dir := t.TempDir()
	k, err := StoreKind(dir, "")
	require.NoError(t, err)
	assert.Equal(t, LogStoreWAL, k)
	k, err = StoreKind(dir, LogStoreBolt)
	require.NoError(t, err)
	assert.Equal(t, LogStoreBolt, k)
	_, err = StoreKind(dir, "leveldb")
	assert.ErrorIs(t, err, ErrInvalidArgument)
	require.NoError(t, os.Mkdir(filepath.Join(dir, walDir), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, boltFile), nil, 0o600))
	_, err = StoreKind(dir, "")
	assert.ErrorContains(t, err, "has both")
}

// A follower cuts a conflicting log tail (DeleteRange of a suffix) after a
// leader change; the store must still read its log after a restart.
// raft-wal v0.4.0 failed this ("sealed segment has no index block", and
// Raft panics at start); v0.4.1 fixed it.
func TestWALReadsAfterTailTruncationAndRestart(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenRaftStore(dir, LogStoreWAL)
	require.NoError(t, err)
	var logs []*raft.Log
	for i := uint64(1); i <= 10; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: []byte("entry")})
	}
	require.NoError(t, s.StoreLogs(logs))
	require.NoError(t, s.DeleteRange(9, 10))
	require.NoError(t, s.StoreLog(&raft.Log{Index: 9, Term: 2, Type: raft.LogCommand, Data: []byte("new")}))
	require.NoError(t, s.Close())

	s, err = OpenRaftStore(dir, LogStoreWAL)
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
