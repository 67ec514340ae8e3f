package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/fencerlock/fencer/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSnapshotSaveRestoresIntoANewCluster(t *testing.T) {
	r := fencer(t, "acquire", "snap-lock", "--owner", "snap-owner", "--ttl", "1m")
	require.Equal(t, 0, r.code, r.stderr)
	token, err := strconv.ParseUint(assignments(t, r.stdout)["FENCER_TOKEN"], 10, 64)
	require.NoError(t, err)

	file := filepath.Join(t.TempDir(), "backup.fencer")
	r = fencer(t, "snapshot", "save", file)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "saved ")
	data, err := os.ReadFile(file)
	require.NoError(t, err)

	cfg := server.DefaultConfig()
	cfg.DataDir, cfg.RaftAddr = t.TempDir(), "127.0.0.1:0"
	cfg.RaftLogLevel, cfg.Logger = "off", slog.New(slog.NewTextHandler(io.Discard, nil))
	n, err := server.Open(cfg)
	require.NoError(t, err)
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, err := n.RestoreSnapshot(ctx, data)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, info.MaxToken, token)
	s, held, err := n.Status(ctx, "snap-lock")
	require.NoError(t, err)
	require.True(t, held)
	assert.Equal(t, "snap-owner", s.Owner)
	assert.Equal(t, token, s.Token)
	g, ok, err := n.Acquire(ctx, "other", "me", time.Minute, 0)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Greater(t, g.Token, info.MaxToken)

	r = fencer(t, "snapshot", "save")
	assert.Equal(t, exitUsage, r.code)
}
