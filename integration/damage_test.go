package integration

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runRefused runs fencerd with args, which must make it exit non-zero
// within 30 s; it returns what fencerd printed.
func runRefused(t *testing.T, args []string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, fencerdBin, args...).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() <= 0 {
		t.Fatalf("fencerd %v: want a non-zero exit, got %v\n%s", args, err, out)
	}
	return string(out)
}

// A node whose disk was lost cannot come back under its old ID while it is
// still a member: it would vote and acknowledge entries with none of the
// log it had promised to keep. It is refused before its Raft starts, and
// once removed (FENCE.REMOVE) it joins again under the same ID, as
// docs/operations.md tells an operator to do.
func TestLostDiskRejoinNeedsRemoveFirst(t *testing.T) {
	c := startNodeCluster(t, 3)
	const k = 2 // started with --join
	if c.leader(t) == k {
		c.transfer(t, 0, 0)
	}
	before := c.mustGrant(t, 0, clusterRetryWithin, "before", "a", longTTL)

	d := c.nodes[k]
	d.kill9(t)
	require.NoError(t, os.RemoveAll(d.dataDir), "the disk is lost")
	d.args = append(d.args, "--id", c.ids[k])

	// Refused, and again with what the first attempt left: a node ID and
	// an empty log store are no Raft state either.
	for range 2 {
		out := runRefused(t, d.args)
		for _, want := range []string{"is a member of the cluster", "FENCE.REMOVE " + c.ids[k]} {
			assert.Contains(t, out, want)
		}
	}
	assert.DirExists(t, filepath.Join(d.dataDir, "wal"))

	rest := c.others(k)
	c.remove(t, rest[0], k)
	c.awaitMembers(t, rest, rest, clusterReadyTimeout)
	d.restart(t)
	c.awaitMembers(t, c.all(), c.all(), clusterReadyTimeout)
	s, held := c.statusOf(t, k, clusterRetryWithin, "before")
	require.True(t, held, "the node that joined again has the cluster's locks")
	assert.Equal(t, before.token, s.token)
	g := c.mustGrant(t, k, clusterRetryWithin, "after", "b", time.Minute)
	assert.Greater(t, g.token, before.token)
}

// Raft state without the node ID it belongs to is damage: fencerd exits
// non-zero naming the file and makes up no new ID.
func TestMissingNodeIDStopsFencerd(t *testing.T) {
	d := startFencerd(t)
	v, err := clusterCall(d.addr, requestTimeout, "FENCE.ACQUIRE", "k", "me", "60000")
	require.NoError(t, err)
	_, ok, err := parseGrantReply(v)
	require.NoError(t, err)
	require.True(t, ok)
	code, _ := d.terminate(t)
	require.Zero(t, code)

	path := filepath.Join(d.dataDir, "node-id")
	require.NoError(t, os.Remove(path))
	out := runRefused(t, d.args)
	assert.Contains(t, out, "damaged data directory")
	assert.Contains(t, out, path)
	assert.True(t, strings.Contains(out, "docs/operations.md"), "the message points at what to do:\n%s", out)
	_, err = os.Stat(path)
	assert.ErrorIs(t, err, os.ErrNotExist, "no new ID was made up")
}
