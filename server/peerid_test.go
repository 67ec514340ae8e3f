package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

// TestRaftConnectionSaysWhomItIsFor: an accepted Raft connection reads no
// RPC unless its preamble names this server (and, when both know one, this
// server's cluster); one without a preamble (an older fencer) is refused.
func TestRaftConnectionSaysWhomItIsFor(t *testing.T) {
	inner, err := newTCPStream("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inner.Close() })
	ours := "C1"
	acceptor := newIDStream(inner, "b", func() string { return ours }, slog.New(slog.DiscardHandler))
	addr := raft.ServerAddress(inner.Addr().String())

	// try dials with the dialer's view (the ID it means, its cluster) and
	// returns what the acceptor reads: the payload, or its error.
	try := func(meant, cluster string) (string, error) {
		t.Helper()
		d := newIDStream(inner, "a", func() string { return cluster }, slog.New(slog.DiscardHandler))
		c, err := d.Dial(taggedAddr(raft.ServerID(meant), addr), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte("rpc")); err != nil {
			t.Fatal(err)
		}
		a, err := acceptor.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		b := make([]byte, 3)
		_, err = io.ReadFull(a, b)
		return string(b), err
	}
	if got, err := try("b", "C1"); err != nil || got != "rpc" {
		t.Fatalf("meant for b, same cluster: read %q, %v; want the RPC", got, err)
	}
	if got, err := try("b", ""); err != nil || got != "rpc" {
		t.Fatalf("meant for b by a server without a cluster ID yet: read %q, %v; want the RPC", got, err)
	}
	if _, err := try("c", "C1"); !errors.Is(err, errPeerIdentity) {
		t.Fatalf("meant for c, accepted by b: %v; want %v", err, errPeerIdentity)
	}
	if _, err := try("b", "C2"); !errors.Is(err, errPeerIdentity) {
		t.Fatalf("meant for b of another cluster: %v; want %v", err, errPeerIdentity)
	}
	// A server without a cluster ID yet takes any cluster's connection
	// meant for it (it is about to be added).
	ours = ""
	if got, err := try("b", "C2"); err != nil || got != "rpc" {
		t.Fatalf("meant for b, which has no cluster ID yet: read %q, %v; want the RPC", got, err)
	}

	// No preamble: raft's first byte is an RPC type.
	c, err := net.Dial("tcp", string(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte{0, 1, 2, 3, 4, 5, 6, 7}); err != nil {
		t.Fatal(err)
	}
	a, err := acceptor.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.Read(make([]byte, 8)); !errors.Is(err, errPeerIdentity) {
		t.Fatalf("a connection without a preamble: %v; want %v", err, errPeerIdentity)
	}
	// A dial with no ID to send is refused before it connects.
	if _, err := acceptor.Dial(addr, time.Second); err == nil {
		t.Fatal("a dial without the ID of the server meant succeeded")
	}
}

// The preamble's cluster check reads the
// applied table's cluster ID, which a restarted server does not have until
// its log replays (hashicorp/raft applies the log after a restart only once a
// leader tells it the commit index). Its data directory holds the ID all
// along (cluster-id). So a server restarted without a leader of its own
// cluster, the moment at which a pod comes up at a new IP, takes a
// connection from another cluster meant for its ID (the Helm chart's IDs are
// pod names: fencer-0.., the same in every release of the same name).
func TestRestartedServerRefusesAnotherClusterBeforeItsLogReplays(t *testing.T) {
	dir := t.TempDir()
	n := openNode(t, dir)
	id := n.ID()
	cluster := n.ClusterID()
	require.NotEmpty(t, cluster)
	// Control: while its table has the ID, the other cluster is refused.
	if err := dialAsOtherCluster(t, id, n.RaftAddr()); err == nil {
		t.Fatalf("control: %s with cluster %s applied answered another cluster", id, cluster)
	}
	// A second voter that never answers: after a restart the node cannot
	// elect itself, as a member of a 3-node cluster restarted alone cannot.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_ = n.Join(ctx, "ghost", "127.0.0.1:1", "127.0.0.1:2")
	cancel()
	require.NoError(t, n.Close())

	cfg := DefaultConfig()
	cfg.DataDir = dir
	cfg.RaftAddr = "127.0.0.1:0"
	cfg.RaftLogLevel = "error"
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	r, err := Open(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	onDisk, err := readClusterID(dir)
	require.NoError(t, err)
	require.Equal(t, cluster, onDisk, "the data directory names the node's cluster")
	t.Logf("restarted %s: cluster ID on disk %s, applied %q", id, onDisk, r.ClusterID())

	if err := dialAsOtherCluster(t, id, r.RaftAddr()); err == nil {
		t.Fatalf("%s, of cluster %s (its data directory says so), answered an AppendEntries from cluster %q meant for it: the cluster check passed because its table has not replayed its ID yet",
			id, onDisk, "another-cluster")
	}
}

// dialAsOtherCluster sends an AppendEntries (term 0, harmless) meant for
// id at addr from a server of cluster "another-cluster"; nil if answered.
func dialAsOtherCluster(t *testing.T, id, addr string) error {
	return dialAs(t, id, addr, "another-cluster")
}

// dialAs is dialAsOtherCluster from otherCluster.
func dialAs(t *testing.T, id, addr, otherCluster string) error {
	inner, err := newTCPStream("127.0.0.1:0", nil)
	require.NoError(t, err)
	other := newIDStream(inner, "fencer-x", func() string { return otherCluster }, slog.New(slog.DiscardHandler))
	nt := raft.NewNetworkTransport(other, 1, 5*time.Second, io.Discard)
	defer nt.Close()
	req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("fencer-x"), Addr: []byte(inner.Addr().String())}, Term: 0}
	var resp raft.AppendEntriesResponse
	return idTransport{nt}.AppendEntries(raft.ServerID(id), raft.ServerAddress(addr), req, &resp)
}

// A server ID longer than the preamble's field limit could never be reached
// over Raft (every connection meant for it would be refused), so the node
// refuses it when it opens, naming the limit.
func TestServerIDLongerThanThePreambleFieldIsRefusedAtStart(t *testing.T) {
	long := strings.Repeat("n", maxPreambleField+1)
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.ID = long
	cfg.RaftAddr = "127.0.0.1:0"
	cfg.RaftLogLevel = "error"
	cfg.Logger = slog.New(slog.DiscardHandler)
	n, err := Open(cfg)
	if err == nil {
		_ = n.Close()
		t.Fatalf("a server ID of %d bytes opened; no Raft connection can name it", len(long))
	}
	require.Contains(t, err.Error(), "512")
	// At the limit it opens and is reachable.
	ok := strings.Repeat("n", maxPreambleField)
	m := openNode(t, t.TempDir(), func(c *Config) { c.ID = ok })
	require.NoError(t, dialAs(t, ok, m.RaftAddr(), m.ClusterID()), "a server ID of %d bytes is reachable over Raft", len(ok))
}
