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
	require.Eventually(t, func() bool {
		for _, p := range snapshotStates(d.dataDir) {
			if b, err := os.ReadFile(p); err == nil && bytes.HasPrefix(b, []byte("FNCS\x08\x01")) {
				return true
			}
		}
		return false
	}, 10*time.Second, 50*time.Millisecond, "no snapshot taken at level 1")
	code, _ := d.terminate(t)
	require.Equal(t, 0, code)

	raised := 0
	for _, p := range snapshotStates(d.dataDir) {
		if raiseSnapshotLevel(t, p) {
			raised++
		}
	}
	require.NotZero(t, raised, "no snapshot at level 1")
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

// snapshotStates returns the state.bin of every complete raft snapshot
// under dir (raft writes one in a ".tmp" directory, then renames it).
func snapshotStates(dir string) []string {
	var states []string
	_ = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.Name() == "state.bin" && !strings.HasSuffix(filepath.Dir(p), ".tmp") {
			states = append(states, p)
		}
		return nil
	})
	return states
}

// raiseSnapshotLevel sets the format level of the raft snapshot at
// state.bin path p (fencer's snapshot version 8: "FNCS", 8, the level) to
// 2, and its checksum in meta.json beside it. It leaves a snapshot taken
// before the raise (version 7, level 0) as it is and reports false: the
// node tries its newest snapshot first, and refuses the directory even if
// an older one would load.
func raiseSnapshotLevel(t *testing.T, p string) bool {
	t.Helper()
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	if bytes.HasPrefix(b, []byte("FNCS\x07")) {
		return false
	}
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
	return true
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

// TestFormatRaisedInAFormedCluster: three nodes of this build that form a
// cluster together (--bootstrap-expect) start at format level 0 (the first
// leader has heard from nobody) and are raised to 1 once the leader's probe
// has every member's answer, confirmed: every node's INFO says so within
// seconds, and the leader logs the raise with each member's level.
func TestFormatRaisedInAFormedCluster(t *testing.T) {
	ds, _ := formingDaemons(t, 3, 3)
	for _, d := range ds {
		d.start(t)
	}
	c := &nodeCluster{nodes: ds, ids: make([]string, len(ds))}
	c.formed(t, c.all(), c.all())
	start := time.Now()
	require.Eventually(t, func() bool {
		for _, d := range ds {
			v, err := clusterCall(d.addr, 2*time.Second, "INFO", "server")
			if err != nil || !strings.Contains(fmt.Sprint(v), "fencer_format_in_use:1\r\n") {
				return false
			}
		}
		return true
	}, 20*time.Second, 100*time.Millisecond, "every node at format level 1")
	t.Logf("raised on every node %v after formation", time.Since(start).Round(10*time.Millisecond))
	raised := 0
	for _, d := range ds {
		if strings.Contains(d.log(t), "raised the cluster's format level: every member reads it") {
			raised++
		}
	}
	assert.Equal(t, 1, raised, "one leader raised it, once")
}
