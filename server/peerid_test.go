package server

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"
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
