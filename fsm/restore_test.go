package fsm

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestForNewClusterRaisesTheFloor(t *testing.T) {
	old := New()
	old.ApplyCommand(5, Command{Op: OpAcquire, Key: "a", Owner: "x", TTL: 1000})
	old.ApplyCommand(9, Command{Op: OpAcquire, Key: "b", Owner: "y", TTL: 2000})
	old.ApplyCommand(12, Command{Op: OpAcquire, Key: "c", Owner: "z", TTL: 3000})
	old.ApplyCommand(14, Command{Op: OpRelease, Key: "c", Owner: "z"})
	old.ApplyCommand(20, Command{Op: OpMember, Key: "n1", Owner: "127.0.0.1:7379"})

	data, info, err := ForNewCluster(old.MarshalSnapshot())
	require.NoError(t, err)
	assert.Equal(t, SnapshotInfo{Locks: 2, MaxToken: 12, Floor: 20}, info)

	fresh := New()
	require.NoError(t, fresh.Restore(io.NopCloser(bytes.NewReader(data))))
	for _, k := range []string{"a", "b"} {
		want, _ := old.Get(k)
		got, held := fresh.Get(k)
		require.True(t, held, k)
		assert.Equal(t, want, got, k)
	}
	assert.Empty(t, fresh.Members())
	assert.Equal(t, uint64(0), fresh.LastIndex())
	// The new cluster's log starts again at a small index; its first grant
	// still exceeds every token in the snapshot.
	r := fresh.ApplyCommand(3, Command{Op: OpAcquire, Key: "d", Owner: "w", TTL: 1000})
	require.Equal(t, Granted, r.Code)
	assert.Equal(t, uint64(23), r.Lease.Token)
	assert.Greater(t, r.Lease.Token, info.MaxToken)
	// The remembered release survives: z cannot resurrect c.
	r = fresh.ApplyCommand(4, Command{Op: OpAcquire, Key: "c", Owner: "z", TTL: 1000})
	assert.Equal(t, Refused, r.Code)
	// Restoring the new cluster's snapshot into yet another one goes on.
	_, info2, err := ForNewCluster(fresh.MarshalSnapshot())
	require.NoError(t, err)
	assert.Equal(t, uint64(24), info2.Floor)
}

func TestForNewClusterRefusesJunk(t *testing.T) {
	for _, b := range [][]byte{nil, []byte("junk"), append(New().MarshalSnapshot(), 0)} {
		_, _, err := ForNewCluster(b)
		assert.True(t, errors.Is(err, ErrBadSnapshot), "%q: %v", b, err)
	}
}
