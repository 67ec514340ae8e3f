package server

import (
	"crypto/tls"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/fencerlock/fencer/internal/testca"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// raftTLS makes a CA and returns a RaftTLS config maker for nodes it signs.
func raftTLS(t *testing.T) func() *tls.Config {
	t.Helper()
	ca := testca.New(t, "raft CA")
	return func() *tls.Config {
		return &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, "node")},
			ClientCAs: ca.Pool, RootCAs: ca.Pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	}
}

// openJoiner opens a node that waits to be added to a cluster.
func openJoiner(t *testing.T, tlsCfg *tls.Config) *Node {
	t.Helper()
	cfg := DefaultConfig()
	cfg.DataDir, cfg.RaftAddr, cfg.RaftLogLevel, cfg.Join = t.TempDir(), "127.0.0.1:0", "error", true
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.RaftTLS = tlsCfg
	n, err := Open(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Close() })
	return n
}

// Raft over mutual TLS: a node with a certificate from the cluster's CA
// joins and replicates; a node whose certificate comes from a foreign CA is
// added to the configuration but never receives anything.
func TestRaftMutualTLS(t *testing.T) {
	cluster, foreign := raftTLS(t), raftTLS(t)
	leader := openNode(t, t.TempDir(), func(c *Config) { c.RaftTLS = cluster() })
	g := mustAcquire(t, leader, "k", "me", 30*time.Second)

	good := openJoiner(t, cluster())
	require.NoError(t, leader.Join(ctxT(t), good.ID(), good.RaftAddr(), "127.0.0.1:1"))
	require.Eventually(t, func() bool {
		l, ok := good.table.Get("k")
		return ok && l.Token == g.Token
	}, 10*time.Second, 20*time.Millisecond, "the member with a valid certificate replicates")

	bad := openJoiner(t, foreign())
	require.NoError(t, leader.Join(ctxT(t), bad.ID(), bad.RaftAddr(), "127.0.0.1:2"), "a majority (leader, good) commits the change")
	time.Sleep(2 * time.Second) // many heartbeat intervals
	_, ok := bad.table.Get("k")
	assert.False(t, ok, "the node with a foreign certificate received nothing")
	id, _ := bad.Leader()
	assert.Empty(t, id, "and knows no leader")
	mustAcquire(t, leader, "k2", "me", 30*time.Second) // the cluster still commits
}
