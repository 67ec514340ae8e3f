package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// RaftCluster is the bare-raft baseline: raftbench processes
// (internal/cmd/raftbench), one per node, driven over their stdin and
// stdout.
type RaftCluster struct {
	Target string
	nodes  []*Proc
	procs  *Procs
}

// raftState is raftbench's reply to "state".
type raftState struct {
	State   string `json:"state"`
	Leader  string `json:"leader"`
	Applied uint64 `json:"applied"`
	Last    uint64 `json:"last"`
	Error   string `json:"error"`
}

// StartRaft starts an n-node baseline cluster on free loopback ports with
// its data and logs under dir, and waits until it has a leader that every
// node knows. extraArgs go to every node (raftbench's flags).
func StartRaft(ctx context.Context, procs *Procs, bin, dir, target string, n int, extraArgs ...string) (*RaftCluster, error) {
	ports, err := FreePorts(n)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var peers []string
	for i, p := range ports {
		peers = append(peers, fmt.Sprintf("r%d=%s", i+1, net.JoinHostPort("127.0.0.1", strconv.Itoa(p))))
	}
	c := &RaftCluster{Target: target, procs: procs}
	for i := range n {
		id := "r" + strconv.Itoa(i+1)
		args := append([]string{"--id", id, "--dir", filepath.Join(dir, id),
			"--raft-addr", net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[i])),
			"--peers", strings.Join(peers, ",")}, extraArgs...)
		p, err := procs.Start("raftbench "+id, dir, filepath.Join(dir, id+".log"), true, bin, args...)
		if err != nil {
			return c, err
		}
		c.nodes = append(c.nodes, p)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := c.settled(ctx)
		if err == nil {
			return c, nil
		}
		if time.Now().After(deadline) {
			return c, fmt.Errorf("raft baseline: no settled leader after 30s: %w", err)
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return c, err
		}
	}
}

// leader returns the node that is leader and that every node knows as
// leader.
func (c *RaftCluster) leader(ctx context.Context) (*Proc, raftState, error) {
	var states []raftState
	for _, p := range c.nodes {
		var s raftState
		if err := c.ask(ctx, p, "state", 5*time.Second, &s); err != nil {
			return nil, s, err
		}
		states = append(states, s)
	}
	var lead *Proc
	var ls raftState
	for i, s := range states {
		if s.State == "Leader" {
			lead, ls = c.nodes[i], s
		}
	}
	if lead == nil {
		return nil, ls, fmt.Errorf("no leader yet")
	}
	for i, s := range states {
		if s.Leader == "" {
			return nil, ls, fmt.Errorf("%s knows no leader yet", c.nodes[i].Name)
		}
	}
	return lead, ls, nil
}

// settled reports whether the cluster has a leader every node knows and
// every node has applied the leader's log. A follower learns that an entry
// is committed with the next append, so the leader applies one more entry
// before the followers are checked against its earlier applied index.
func (c *RaftCluster) settled(ctx context.Context) error {
	lead, ls, err := c.leader(ctx)
	if err != nil {
		return err
	}
	var applied raftState
	if err := c.ask(ctx, lead, "apply", 10*time.Second, &applied); err != nil {
		return err
	}
	if applied.Error != "" {
		return fmt.Errorf("%s: %s", lead.Name, applied.Error)
	}
	for _, p := range c.nodes {
		var s raftState
		if err := c.ask(ctx, p, "state", 5*time.Second, &s); err != nil {
			return err
		}
		if s.Applied < ls.Applied {
			return fmt.Errorf("%s applied %d of the leader's %d", p.Name, s.Applied, ls.Applied)
		}
	}
	return nil
}

// ask sends one command line to p and decodes its one-line reply into v.
func (c *RaftCluster) ask(ctx context.Context, p *Proc, cmd string, timeout time.Duration, v any) error {
	if p.Done() {
		return fmt.Errorf("%s exited: %s (log %s)", p.Name, p.State(), p.LogPath)
	}
	if _, err := fmt.Fprintln(p.Stdin, cmd); err != nil {
		return fmt.Errorf("%s: %w", p.Name, err)
	}
	type answer struct {
		line []byte
		err  error
	}
	ch := make(chan answer, 1)
	go func() {
		line, err := p.Stdout.ReadBytes('\n')
		ch <- answer{line, err}
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case a := <-ch:
		if a.err != nil {
			return fmt.Errorf("%s: %w (log %s)", p.Name, a.err, p.LogPath)
		}
		return json.Unmarshal(a.line, v)
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		// The reader goroutine still owns p.Stdout; the process is of no
		// further use.
		p.Stop(StopGrace)
		return fmt.Errorf("%s: no answer to %q within %v", p.Name, cmd, timeout)
	}
}

// Run drives the leader with clients concurrent applies for warmup, then
// duration, and returns its result line.
func (c *RaftCluster) Run(ctx context.Context, clients int, warmup, duration time.Duration) RaftResult {
	res := RaftResult{Target: c.Target, Workload: "commits", Clients: clients, Nodes: len(c.nodes)}
	lead, _, err := c.leader(ctx)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	cmd := fmt.Sprintf("run %d %s %s %s", clients, warmup, duration, c.Target)
	if err := c.ask(ctx, lead, cmd, warmup+duration+time.Minute, &res); err != nil {
		res.Error = err.Error()
	}
	return res
}

// Stop stops the cluster's processes.
func (c *RaftCluster) Stop() { c.procs.StopSome(StopGrace, c.nodes...) }
