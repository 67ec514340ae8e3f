package integration

// Helpers of the Go client's tests (client_*_test.go): real fencerd
// processes driven through package client. Names start with "cl" so that
// they stay apart from the other tests' helpers in this package.

import (
	"bytes"
	"context"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fencerlock/fencer/client"
	"github.com/fencerlock/fencer/internal/testbin"
)

const (
	// clFormTimeout bounds forming a three-node cluster (joins, election).
	clFormTimeout = 30 * time.Second
	// clElectionTimeout bounds how long after a leader's death the others
	// agree on a new one; an election takes one to three seconds.
	clElectionTimeout = 15 * time.Second
)

// clNew returns a client of addrs, closed when the test ends.
func clNew(t *testing.T, addrs []string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(addrs, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// clCtx returns a context that ends after d or when the test ends.
func clCtx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// clCounter counts what a client writes: the handshake go-redis sends on a
// new connection (HELLO), the commands after it, and the FENCE.ACQUIRE
// commands among those.
type clCounter struct {
	handshakes, commands, acquires atomic.Int64
}

// dialer returns a client option whose connections count what they write.
func (n *clCounter) dialer() client.Option {
	var d net.Dialer
	return client.WithDialer(func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return clCountingConn{conn, n}, nil
	})
}

type clCountingConn struct {
	net.Conn
	n *clCounter
}

// Write counts commands: go-redis writes each command with one Write (the
// client does not pipeline), and every command the client sends is small.
func (c clCountingConn) Write(p []byte) (int, error) {
	up := bytes.ToUpper(p)
	switch {
	case bytes.Contains(up, []byte("\r\nHELLO\r\n")):
		c.n.handshakes.Add(1)
	default:
		c.n.commands.Add(1)
		c.n.acquires.Add(int64(bytes.Count(up, []byte("\r\nFENCE.ACQUIRE\r\n"))))
	}
	return c.Conn.Write(p)
}

// clCluster is three fencerd processes forming one Raft cluster.
type clCluster struct {
	nodes []*daemon
}

// clStartCluster starts a three-node cluster (node 0 bootstraps, the others
// join it) and returns once every node lists three members with client
// addresses and all agree on the leader. The processes stop when the test
// ends.
func clStartCluster(t *testing.T) *clCluster {
	t.Helper()
	c := &clCluster{nodes: newDaemons(t, 3)}
	for _, d := range c.nodes[1:] {
		d.args = append(d.args, "--join", c.nodes[0].addr)
	}
	start := time.Now()
	for _, d := range c.nodes {
		d.start(t)
	}
	l := c.leader(t, clFormTimeout)
	t.Logf("cluster formed in %v; leader is node %d (%s)", time.Since(start).Round(time.Millisecond), l, c.nodes[l].addr)
	return c
}

// addrs returns the client addresses of the nodes at idx (all if none).
func (c *clCluster) addrs(idx ...int) []string {
	if len(idx) == 0 {
		idx = []int{0, 1, 2}
	}
	var out []string
	for _, i := range idx {
		out = append(out, c.nodes[i].addr)
	}
	return out
}

// leader waits until every running node lists three members with client
// addresses and names the same leader, and returns its index.
func (c *clCluster) leader(t *testing.T, within time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(within)
	last := "no answer yet"
	for {
		l, why := c.agreed()
		if l >= 0 {
			return l
		}
		last = why
		if time.Now().After(deadline) {
			t.Fatalf("no agreed leader within %v: %s", within, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// agreed returns the leader every running node names, or -1 and why not.
func (c *clCluster) agreed() (int, string) {
	leader := -1
	for _, d := range c.nodes {
		if d.proc.done() {
			continue
		}
		ms, err := clMembersOf(d.addr)
		if err != nil {
			return -1, d.addr + ": " + err.Error()
		}
		found := -1
		for _, m := range ms {
			if m.ClientAddr == "" {
				return -1, d.addr + " lists a member without a client address"
			}
			if m.Role == "leader" {
				for j, n := range c.nodes {
					if n.addr == m.ClientAddr && !n.proc.done() {
						found = j
					}
				}
			}
		}
		if len(ms) != 3 || found < 0 {
			return -1, d.addr + " does not list three members and a running leader"
		}
		if leader >= 0 && found != leader {
			return -1, "nodes disagree on the leader"
		}
		leader = found
	}
	return leader, ""
}

// clMembersOf asks the node at addr (only it) for the members it sees.
func clMembersOf(addr string) ([]client.Member, error) {
	c, err := client.New([]string{addr}, client.WithFailoverTimeout(time.Second), client.WithRequestTimeout(time.Second))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return c.Members(ctx)
}

// stop sends SIGSTOP to the daemon's process and arranges SIGCONT when the
// test ends, before the harness stops the process.
func (d *daemon) clStop(t *testing.T) {
	t.Helper()
	p := d.proc
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP: %v", err)
	}
	t.Cleanup(func() { _ = p.cmd.Process.Signal(syscall.SIGCONT) })
}

// clFencerBin builds the fencer command into a temporary directory.
func clFencerBin(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "fencer")
	if err := testbin.Build(bin, "cmd/fencer"); err != nil {
		t.Fatal(err)
	}
	return bin
}

// clLines splits output into lines, without the final newline.
func clLines(s string) []string {
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}
