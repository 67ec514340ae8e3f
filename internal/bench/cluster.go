package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/fencerlock/fencer/internal/resp"
)

// StopGrace is how long a child gets to exit after SIGTERM before its
// process group is killed.
const StopGrace = 15 * time.Second

// FencerCluster is fencerd processes on loopback, started by StartFencer.
type FencerCluster struct {
	Nodes []FencerNode
	procs *Procs
}

// FencerNode is one fencerd of a FencerCluster.
type FencerNode struct {
	ID, Addr, RaftAddr, DataDir string
	Proc                        *Proc
}

// Stop stops the cluster's processes.
func (c *FencerCluster) Stop() {
	var ps []*Proc
	for _, n := range c.Nodes {
		if n.Proc != nil {
			ps = append(ps, n.Proc)
		}
	}
	c.procs.StopSome(StopGrace, ps...)
}

// StartFencer starts an n-node fencerd cluster on free loopback ports with
// its data and logs under dir: node 1 bootstraps, the others join through
// it. It returns once every node is a voter with its client address
// recorded, an acquire and release work, and every node has applied the
// leader's log. On error the processes already started stay in procs.
func StartFencer(ctx context.Context, procs *Procs, bin, dir string, n int, extraArgs ...string) (*FencerCluster, error) {
	ports, err := FreePorts(2 * n)
	if err != nil {
		return nil, err
	}
	c := &FencerCluster{procs: procs}
	for i := range n {
		id := "n" + strconv.Itoa(i+1)
		node := FencerNode{
			ID:       id,
			Addr:     net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2*i])),
			RaftAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2*i+1])),
			DataDir:  filepath.Join(dir, id),
		}
		args := []string{"--id", id, "--data-dir", node.DataDir, "--listen", node.Addr,
			"--raft-listen", node.RaftAddr, "--http-listen", "off", "--log-level", "warn"}
		if i > 0 {
			args = append(args, "--join", c.Nodes[0].Addr)
		}
		args = append(args, extraArgs...)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return c, err
		}
		p, err := procs.Start("fencerd "+id, dir, filepath.Join(dir, id+".log"), false, bin, args...)
		if err != nil {
			return c, err
		}
		node.Proc = p
		c.Nodes = append(c.Nodes, node)
		if i == 0 {
			if err := c.waitUp(ctx, 0, 30*time.Second); err != nil {
				return c, err
			}
		}
	}
	if err := c.waitMembers(ctx, 60*time.Second); err != nil {
		return c, err
	}
	return c, nil
}

// waitUp waits until node i grants and releases a lock.
func (c *FencerCluster) waitUp(ctx context.Context, i int, d time.Duration) error {
	node := c.Nodes[i]
	deadline := time.Now().Add(d)
	var last error
	for time.Now().Before(deadline) {
		if node.Proc.Done() {
			return fmt.Errorf("fencerd %s exited: %s (log %s)", node.ID, node.Proc.State(), node.Proc.LogPath)
		}
		if last = TryOnce(node.Addr); last == nil {
			return nil
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("fencerd %s not ready after %v: %v (log %s)", node.ID, d, last, node.Proc.LogPath)
}

// waitMembers waits until the leader lists every node as a voter with its
// client address, and every node has applied as far as the leader.
func (c *FencerCluster) waitMembers(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	var last error
	for time.Now().Before(deadline) {
		for _, n := range c.Nodes {
			if n.Proc.Done() {
				return fmt.Errorf("fencerd %s exited: %s (log %s)", n.ID, n.Proc.State(), n.Proc.LogPath)
			}
		}
		if last = c.settled(); last == nil {
			return nil
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("fencer cluster not settled after %v: %v", d, last)
}

func (c *FencerCluster) settled() error {
	leader, err := LeaderAddr(c.Nodes[0].Addr)
	if err != nil {
		return err
	}
	cn, err := dial(leader, time.Second)
	if err != nil {
		return err
	}
	defer cn.Close()
	r, err := cn.Do(time.Now().Add(time.Second), "FENCE.MEMBERS")
	if err != nil {
		return err
	}
	if r.Kind != resp.Array || len(r.Elems) != len(c.Nodes) {
		return fmt.Errorf("FENCE.MEMBERS lists %d of %d nodes", len(r.Elems), len(c.Nodes))
	}
	// A follower learns that an entry is committed with the next append,
	// so: note the leader's applied index, write, then every node must
	// have applied at least as far as the noted index.
	want, err := appliedIndex(leader)
	if err != nil {
		return err
	}
	if err := TryOnce(leader); err != nil {
		return err
	}
	for _, n := range c.Nodes {
		got, err := appliedIndex(n.Addr)
		if err != nil {
			return err
		}
		if got < want {
			return fmt.Errorf("%s applied %d of the leader's %d", n.ID, got, want)
		}
	}
	return nil
}

// appliedIndex is FENCE.STATEHASH's applied index of the node at addr.
func appliedIndex(addr string) (int64, error) {
	cn, err := dial(addr, time.Second)
	if err != nil {
		return 0, err
	}
	defer cn.Close()
	r, err := cn.Do(time.Now().Add(time.Second), "FENCE.STATEHASH")
	if err != nil {
		return 0, err
	}
	if r.Kind != resp.Array || len(r.Elems) != 2 || r.Elems[0].Kind != resp.Integer {
		return 0, fmt.Errorf("%w: FENCE.STATEHASH answered %s", errProtocol, describe(r))
	}
	return r.Elems[0].Int, nil
}

// LeaderAddr asks the node at addr for the leader's client address
// (FENCE.LEADER).
func LeaderAddr(addr string) (string, error) {
	cn, err := dial(addr, time.Second)
	if err != nil {
		return "", err
	}
	defer cn.Close()
	r, err := cn.Do(time.Now().Add(time.Second), "FENCE.LEADER")
	if err != nil {
		return "", err
	}
	if r.Kind != resp.Array || len(r.Elems) != 2 || r.Elems[1].Str == "" {
		return "", errors.New("no leader known yet")
	}
	return r.Elems[1].Str, nil
}

// TryOnce acquires and releases a fresh lock with a fresh owner at addr.
func TryOnce(addr string) error {
	cn, err := dial(addr, time.Second)
	if err != nil {
		return err
	}
	defer cn.Close()
	id := randHex(6)
	key, owner := "fb-ready-"+id, []byte("fb-ready-"+id)
	deadline := time.Now().Add(5 * time.Second)
	tok, err := cn.Acquire(key, owner, 10*time.Second, 0, deadline)
	if err != nil {
		return err
	}
	if tok == 0 {
		return fmt.Errorf("acquire of the fresh lock %s was refused", key)
	}
	n, err := cn.Release(key, owner, deadline)
	if err != nil {
		return err
	}
	if n != 1 {
		return fmt.Errorf("release of %s answered %d", key, n)
	}
	return nil
}

// FreePorts returns n distinct loopback ports that were free a moment ago.
func FreePorts(n int) ([]int, error) {
	var ports []int
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
