package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/fencerlock/fencer/fsm"
	"github.com/fencerlock/fencer/internal/version"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A --restore file of a format level this build cannot read (saved from a
// cluster of a later build) is refused before the data directory is
// touched, naming the levels and this build's version. No build writes
// level 2 yet: the file is a level-1 snapshot with its level byte raised.
func TestRestoreRefusesUnreadableLevel(t *testing.T) {
	tb := fsm.New()
	tb.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: fsm.Command{Op: fsm.OpFormat, Level: 1}.Encode(nil)})
	b := tb.MarshalSnapshot()
	require.Equal(t, "FNCS\x08\x01", string(b[:6]))
	b[5] = 2
	path := filepath.Join(t.TempDir(), "later.snap")
	require.NoError(t, os.WriteFile(path, b, 0o600))
	_, err := readSnapshot(path)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is at format level 2, and this build reads format levels up to 1 (this is fencer "+version.Version)

	b[5] = 1
	require.NoError(t, os.WriteFile(path, b, 0o600))
	_, err = readSnapshot(path)
	assert.NoError(t, err, "a level-1 snapshot restores")
}
