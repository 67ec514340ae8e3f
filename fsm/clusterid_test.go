package fsm

import (
	"bytes"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The first cluster ID committed names the cluster; a later one (a second
// leader that proposed before it saw the first) does nothing. The ID is in
// every snapshot from version 7, a snapshot of an older version restores
// without one, and ForNewCluster drops it for a cluster seeded from
// another's snapshot.
func TestClusterID(t *testing.T) {
	tb := New()
	assert.Equal(t, "", tb.ClusterID())
	r := tb.ApplyCommand(1, Command{Op: OpClusterID, Key: "c1"})
	assert.Equal(t, Recorded, r.Code)
	r = tb.ApplyCommand(2, Command{Op: OpClusterID, Key: "c2"})
	assert.Equal(t, Stale, r.Code)
	assert.Equal(t, "c1", tb.ClusterID())

	snap := tb.MarshalSnapshot()
	assert.Equal(t, byte(7), snap[len(snapshotMagic)], "level 0 writes version 7")
	back := New()
	require.NoError(t, back.Restore(io.NopCloser(bytes.NewReader(snap))))
	assert.Equal(t, "c1", back.ClusterID())
	assert.Equal(t, snap, back.MarshalSnapshot())

	v6 := append([]byte("FNCS"), 6, 0, 2, 0, 0, 0, 0, 0) // empty, as version 6 wrote it
	old := New()
	require.NoError(t, old.Restore(io.NopCloser(bytes.NewReader(v6))))
	assert.Equal(t, "", old.ClusterID(), "a table from before IDs has none")

	fresh, _, err := ForNewCluster(snap)
	require.NoError(t, err)
	seeded := New()
	require.NoError(t, seeded.Restore(io.NopCloser(bytes.NewReader(fresh))))
	assert.Equal(t, "", seeded.ClusterID())
	assert.Equal(t, uint64(2), seeded.Position(), "the positions go on from the old cluster's")
}

// An OpClusterID entry decodes as it was encoded; one with a lock's fields,
// or inside a transaction, is refused.
func TestClusterIDEncoding(t *testing.T) {
	c := Command{Op: OpClusterID, Key: "0123abcd"}
	got, err := Decode(c.Encode(nil))
	require.NoError(t, err)
	assert.Equal(t, c, got)
	for _, bad := range []Command{
		{Op: OpClusterID},
		{Op: OpClusterID, Key: "x", Owner: "o"},
		{Op: OpClusterID, Key: "x", TTL: 5},
	} {
		_, err := Decode(bad.Encode(nil))
		assert.ErrorIs(t, err, ErrBadEntry, "%+v", bad)
	}
	d := New().Draft()
	defer d.Release()
	_, err = d.Apply(c)
	assert.ErrorIs(t, err, ErrBadEntry)
}
