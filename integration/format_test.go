package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/crc64"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFormatUnreadableDataDirRefused: fencerd on a data directory whose
// snapshot is at a format level above what it reads exits with status 1
// and a message naming both levels and its version, without a panic, and
// says the same on the next start (it recorded the refusal). No build
// writes level 2 yet, so the test makes that data directory from a real
// one of level 1 (fencerd's own snapshot, with its level byte raised and
// raft's checksum recomputed): the one fake part here.
func TestFormatUnreadableDataDirRefused(t *testing.T) {
	d := newDaemons(t, 1)[0]
	d.args = append(d.args, "--snapshot-threshold", "1", "--snapshot-interval", "100ms")
	d.start(t)
	require.Eventually(t, func() bool {
		v, err := clusterCall(d.addr, 5*time.Second, "INFO", "server")
		return err == nil && strings.Contains(fmt.Sprint(v), "fencer_format_in_use:1")
	}, 10*time.Second, 50*time.Millisecond, "a cluster of one runs at level 1")
	for i := range 5 {
		key := fmt.Sprintf("k%d", i)
		_, err := clusterCall(d.addr, 5*time.Second, "FENCE.ACQUIRE", key, "me", "60000")
		require.NoError(t, err)
	}
	var states []string
	require.Eventually(t, func() bool {
		states = nil
		_ = filepath.WalkDir(d.dataDir, func(p string, e fs.DirEntry, err error) error {
			if err == nil && e.Name() == "state.bin" {
				states = append(states, p)
			}
			return nil
		})
		return len(states) > 0
	}, 10*time.Second, 50*time.Millisecond, "no snapshot taken")
	code, _ := d.terminate(t)
	require.Equal(t, 0, code)

	for _, p := range states {
		raiseSnapshotLevel(t, p)
	}
	out1, code1 := runFencerd(t, d)
	out2, code2 := runFencerd(t, d)
	for _, out := range []string{out1, out2} {
		assert.Contains(t, out, "the snapshot (version 8) is at format level 2, and this build reads format levels up to 1 (this is fencer ")
		assert.Contains(t, out, "upgrade this node to a build that reads format level 2")
		assert.NotContains(t, out, "panic:")
	}
	assert.Equal(t, 1, code1)
	assert.Equal(t, 1, code2)
	_, err := os.Stat(filepath.Join(d.dataDir, "format-refused"))
	assert.NoError(t, err, "the refusal is recorded in the data directory")
}

// raiseSnapshotLevel sets the format level of the raft snapshot at
// state.bin path p (fencer's snapshot version 8: "FNCS", 8, the level) to
// 2, and its checksum in meta.json beside it.
func raiseSnapshotLevel(t *testing.T, p string) {
	t.Helper()
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(b, []byte("FNCS\x08\x01")), "a version-8 snapshot at level 1: % x", b[:min(len(b), 8)])
	b[5] = 2
	require.NoError(t, os.WriteFile(p, b, 0o600))
	h := crc64.New(crc64.MakeTable(crc64.ECMA))
	h.Write(b)
	metaPath := filepath.Join(filepath.Dir(p), "meta.json")
	mb, err := os.ReadFile(metaPath)
	require.NoError(t, err)
	var meta map[string]any
	require.NoError(t, json.Unmarshal(mb, &meta))
	meta["CRC"] = h.Sum(nil) // []byte: base64, as raft writes it
	mb, err = json.Marshal(meta)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(metaPath, mb, 0o600))
}

// runFencerd runs d's binary on its data directory until it exits (within
// 30 s) and returns its output and exit status.
func runFencerd(t *testing.T, d *daemon) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, fencerdBin, append(d.args, "--http-listen", "off")...)
	cmd.Dir = d.dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, ctx.Err(), "fencerd did not exit:\n%s", out)
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatal(err)
		}
	}
	t.Logf("fencerd said:\n%s", strings.TrimSpace(string(out)))
	return string(out), cmd.ProcessState.ExitCode()
}
