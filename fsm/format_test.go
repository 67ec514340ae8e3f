package fsm

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFormatApplied: OpFormat raises the level once, never lowers it, and a
// level above FormatReadable leaves the table as it was (Unreadable).
func TestFormatApplied(t *testing.T) {
	a := newApplier()
	assert.Equal(t, uint64(0), a.t.Format(), "a new table is at level 0")
	assert.Equal(t, Recorded, a.apply(t, Command{Op: OpFormat, Level: 1}).Code)
	assert.Equal(t, uint64(1), a.t.Format())
	assert.Equal(t, Stale, a.apply(t, Command{Op: OpFormat, Level: 1}).Code, "a repeated raise")
	before := a.t.MarshalSnapshot()
	r := a.apply(t, Command{Op: OpFormat, Level: uint8(FormatReadable + 1)})
	assert.Equal(t, Unreadable, r.Code)
	assert.Equal(t, uint8(FormatReadable+1), r.Cmd.Level)
	assert.Equal(t, uint64(1), a.t.Format(), "an unreadable level is not applied")
	after := a.t.MarshalSnapshot()
	// Only the last applied index moved.
	assert.Equal(t, len(before), len(after))
}

// TestFormatEntryValidated: a format entry names a level and nothing else;
// any level decodes (a node that cannot read it must be able to say so).
func TestFormatEntryValidated(t *testing.T) {
	for _, c := range []Command{
		{Op: OpFormat},
		{Op: OpFormat, Level: 1, Key: "k"},
		{Op: OpFormat, Level: 1, Owner: "o"},
		{Op: OpFormat, Level: 1, TTL: 5},
		{Op: OpFormat, Level: 1, Redis: true},
	} {
		_, err := Decode(c.Encode(nil))
		assert.ErrorIs(t, err, ErrBadEntry, "%+v", c)
	}
	got, err := Decode(Command{Op: OpFormat, Level: 255}.Encode(nil))
	require.NoError(t, err)
	assert.Equal(t, uint8(255), got.Level)
	txn := Command{Op: OpTxn, Txn: &Txn{Cmds: []Command{{Op: OpFormat, Level: 1}}}}
	_, err = Decode(txn.Encode(nil))
	assert.Error(t, err, "a format entry inside a transaction")
}

// TestSnapshotVersionByLevel: a table at level 0 writes version 7 (what the
// builds of level 0 read) even with every kind of record; at level 1,
// version 8, which keeps the level through Restore and ForNewCluster.
func TestSnapshotVersionByLevel(t *testing.T) {
	a := newApplier()
	a.apply(t, Command{Op: OpClusterID, Key: "c"})
	a.apply(t, acquire("k", "o", 1000))
	a.apply(t, release("k", "o"))
	s := a.t.MarshalSnapshot()
	assert.Equal(t, byte(7), s[len(snapshotMagic)], "level 0 writes version 7")

	a.apply(t, Command{Op: OpFormat, Level: 1})
	a.apply(t, Command{Op: OpRelease, Key: "k", Owner: "quitter", GiveUp: true})
	s = a.t.MarshalSnapshot()
	assert.Equal(t, byte(8), s[len(snapshotMagic)], "level 1 writes version 8")

	b := New()
	require.NoError(t, b.Restore(io.NopCloser(bytes.NewReader(s))))
	assert.Equal(t, uint64(1), b.Format())
	assert.Equal(t, s, b.MarshalSnapshot())
	assert.True(t, b.Refuses("k", "quitter"), "the give-up survives the snapshot")

	seeded, _, err := ForNewCluster(s)
	require.NoError(t, err)
	c := New()
	require.NoError(t, c.Restore(io.NopCloser(bytes.NewReader(seeded))))
	assert.Equal(t, uint64(1), c.Format(), "a cluster seeded from a level-1 snapshot starts at level 1")
}

// TestSnapshotUnreadable: a version above this build's, or version 8 at a
// level above FormatReadable, is a *FormatError naming them (not a
// malformed snapshot); version 8 at level 0 is malformed (a table at level
// 0 writes 7).
func TestSnapshotUnreadable(t *testing.T) {
	a := newApplier()
	a.apply(t, Command{Op: OpFormat, Level: 1})
	s := a.t.MarshalSnapshot()
	at := len(snapshotMagic)

	future := append([]byte(nil), s...)
	future[at+1] = byte(FormatReadable + 1)
	var fe *FormatError
	err := New().Restore(io.NopCloser(bytes.NewReader(future)))
	require.True(t, errors.As(err, &fe), "%v", err)
	assert.Equal(t, FormatReadable+1, fe.Level)
	assert.Contains(t, err.Error(), "format level 2")
	assert.Contains(t, err.Error(), "reads format levels up to 1")

	v9 := append([]byte(nil), s...)
	v9[at] = 9
	err = New().Restore(io.NopCloser(bytes.NewReader(v9)))
	require.True(t, errors.As(err, &fe), "%v", err)
	assert.Equal(t, byte(9), fe.SnapshotVersion)
	assert.Contains(t, err.Error(), "version 9")

	zero := append([]byte(nil), s...)
	zero[at+1] = 0
	err = New().Restore(io.NopCloser(bytes.NewReader(zero)))
	assert.ErrorIs(t, err, ErrBadSnapshot)
	assert.False(t, errors.As(err, &fe))
}
