// Command raftbench is one node of the bare-raft baseline of `make bench`:
// hashicorp/raft with the stores and settings fencerd uses (its log store,
// server.OpenRaftStore, fsync on; server.RaftConfig, a LogCache of
// server.RaftLogCacheSize, the TCP transport with server.RaftTransportPool
// and RaftTransportTimeout, file snapshots; see settings.go) and a trivial
// state machine that counts entries. It shows
// what raft alone commits on this machine, so that fencer's overhead over
// it is measured rather than assumed.
//
// The harness (internal/bench, RaftCluster) starts one process per node,
// every one with the same --peers, and drives it over stdin and stdout, one
// command a line:
//
//	state                                  -> {"state":"Leader","leader":"n1","applied":12,"last":12}
//	apply                                  -> the same, after applying one entry (leader only)
//	run CLIENTS WARMUP DURATION TARGET     -> one bench.RaftResult JSON line
//
// run, on the leader, starts CLIENTS goroutines that each apply an entry of
// --entry-bytes and wait for its future, over and over, for WARMUP and then
// DURATION, and reports commits/s and latency percentiles of the measured
// window. The process shuts raft down and exits when stdin closes or on
// SIGTERM or SIGINT.
package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fencerlock/fencer/internal/bench"
	"github.com/hashicorp/raft"
)

func main() {
	s := defaultSettings()
	var id, dir, addr, peers string
	flag.StringVar(&id, "id", "", "this node's raft ID (one of --peers)")
	flag.StringVar(&dir, "dir", "", "data directory (log store and snapshots)")
	flag.StringVar(&addr, "raft-addr", "", "raft TCP address to listen on")
	flag.StringVar(&peers, "peers", "", "every voter as id=addr,id=addr,... (this node included)")
	flag.IntVar(&s.EntryBytes, "entry-bytes", s.EntryBytes, "bytes of each applied entry")
	flag.IntVar(&s.LogCache, "log-cache", s.LogCache, "raft.NewLogCache size (0: none)")
	flag.Func("raft-set", "set a raft.Config field, Field=value (bool, integer or duration); repeatable, applied in order to fencerd's (server.RaftConfig)", func(v string) error {
		s.RaftSet = append(s.RaftSet, v)
		return nil
	})
	flag.BoolFunc("batch-apply-ch", "short for --raft-set BatchApplyCh=true (or =false)", func(v string) error {
		s.RaftSet = append(s.RaftSet, "BatchApplyCh="+v)
		return nil
	})
	flag.Func("max-append-entries", "short for --raft-set MaxAppendEntries=N", func(v string) error {
		s.RaftSet = append(s.RaftSet, "MaxAppendEntries="+v)
		return nil
	})
	flag.Parse()
	if id == "" || dir == "" || addr == "" || peers == "" {
		fmt.Fprintln(os.Stderr, "raftbench: --id, --dir, --raft-addr and --peers are required")
		os.Exit(2)
	}
	voters, err := parsePeers(peers)
	if err != nil {
		fmt.Fprintln(os.Stderr, "raftbench:", err)
		os.Exit(2)
	}
	n, err := open(id, dir, addr, voters, s)
	if err != nil {
		fmt.Fprintln(os.Stderr, "raftbench:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	go func() {
		serve(ctx, n, os.Stdin, os.Stdout)
		stop()
	}()
	<-ctx.Done()
	if err := n.close(); err != nil {
		fmt.Fprintln(os.Stderr, "raftbench: shutdown:", err)
		os.Exit(1)
	}
}

func parsePeers(s string) ([]raft.Server, error) {
	var out []raft.Server
	for _, p := range strings.Split(s, ",") {
		id, addr, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("--peers: %q is not id=addr", p)
		}
		out = append(out, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(id), Address: raft.ServerAddress(addr)})
	}
	return out, nil
}

// serve answers the harness's commands until in closes or ctx ends.
func serve(ctx context.Context, n *node, in io.Reader, out io.Writer) {
	sc := bufio.NewScanner(in)
	enc := json.NewEncoder(out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		var v any
		switch {
		case f[0] == "state" && len(f) == 1:
			v = n.state()
		case f[0] == "apply" && len(f) == 1:
			v = n.applyOne()
		case f[0] == "run" && len(f) == 5:
			v = n.runCommand(ctx, f[1:])
		default:
			v = map[string]string{"error": fmt.Sprintf("unknown command %q", sc.Text())}
		}
		if err := enc.Encode(v); err != nil {
			return
		}
	}
}

// nodeState is the reply to "state".
type nodeState struct {
	State   string `json:"state"`
	Leader  string `json:"leader"`
	Applied uint64 `json:"applied"`
	Last    uint64 `json:"last"`
	Error   string `json:"error,omitempty"`
}

func (n *node) state() nodeState {
	_, lid := n.raft.LeaderWithID()
	return nodeState{State: n.raft.State().String(), Leader: string(lid),
		Applied: n.raft.AppliedIndex(), Last: n.raft.LastIndex()}
}

// applyOne applies one entry (on the leader) and reports the state after.
func (n *node) applyOne() nodeState {
	err := n.raft.Apply(make([]byte, n.settings.EntryBytes), 10*time.Second).Error()
	s := n.state()
	if err != nil {
		s.Error = err.Error()
	}
	return s
}

func (n *node) runCommand(ctx context.Context, args []string) bench.RaftResult {
	res := bench.RaftResult{Workload: "commits", Target: args[3]}
	clients, err := strconv.Atoi(args[0])
	warmup, err2 := time.ParseDuration(args[1])
	dur, err3 := time.ParseDuration(args[2])
	if err := errors.Join(err, err2, err3); err != nil || clients < 1 || dur <= 0 {
		res.Error = fmt.Sprintf("run: want CLIENTS WARMUP DURATION TARGET, got %q", args)
		return res
	}
	return n.run(ctx, args[3], clients, warmup, dur)
}

// run drives the load from inside the leader.
func (n *node) run(ctx context.Context, target string, clients int, warmup, dur time.Duration) bench.RaftResult {
	s := n.settings
	res := bench.RaftResult{Target: target, Workload: "commits", Clients: clients, Nodes: n.voters,
		Load1: bench.Load1(), EntryBytes: s.EntryBytes, BatchApplyCh: n.config.BatchApplyCh,
		MaxAppendEntries: n.config.MaxAppendEntries, LogCache: s.LogCache, LogStore: "wal",
		SnapshotThresh: n.config.SnapshotThreshold, RaftSet: s.effectiveRaftSet()}
	if n.raft.State() != raft.Leader {
		res.Error = "not the leader"
		return res
	}
	start := time.Now()
	measureStart := start.Add(warmup)
	end := measureStart.Add(dur)
	var seq atomic.Uint64
	type tally struct {
		lat      bench.Latencies
		commits  int64
		errs     int64
		firstErr error
	}
	tallies := make([]tally, clients)
	var wg sync.WaitGroup
	for i := range tallies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := &tallies[i]
			t.lat = make(bench.Latencies, 0, 4096)
			for ctx.Err() == nil {
				t0 := time.Now()
				if !t0.Before(end) {
					return
				}
				// A fresh slice each time: raft and its LogCache keep it.
				entry := make([]byte, s.EntryBytes)
				binary.LittleEndian.PutUint64(entry, seq.Add(1))
				err := n.raft.Apply(entry, 10*time.Second).Error()
				t1 := time.Now()
				measured := !t0.Before(measureStart) && !t1.After(end)
				if err != nil {
					if t.firstErr == nil {
						t.firstErr = err
					}
					if measured {
						t.errs++
					}
					if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) || errors.Is(err, raft.ErrRaftShutdown) {
						return
					}
					continue
				}
				if measured {
					t.commits++
					t.lat = append(t.lat, t1.Sub(t0))
				}
			}
		}()
	}
	sleepUntil(ctx, measureStart)
	cpu0, ru0 := bench.HostCPU(), bench.ProcCPU()
	sleepUntil(ctx, end)
	cpu1, ru1 := bench.HostCPU(), bench.ProcCPU()
	wg.Wait()
	if ctx.Err() != nil {
		res.Error = "interrupted"
		return res
	}
	window := end.Sub(measureStart)
	var lat bench.Latencies
	for i := range tallies {
		t := &tallies[i]
		lat = append(lat, t.lat...)
		res.Commits += t.commits
		res.Errors += t.errs
		if res.FirstError == "" && t.firstErr != nil {
			res.FirstError = t.firstErr.Error()
		}
	}
	lat.Sort()
	res.Seconds = window.Seconds()
	res.CommitsPerS = float64(int64(float64(res.Commits)/window.Seconds()*10)) / 10
	res.CommitP50, res.CommitP99, res.CommitP999, res.CommitMax = lat.Pct(0.5), lat.Pct(0.99), lat.Pct(0.999), lat.Pct(1)
	res.LeaderCPUPct = bench.CPUPct(ru1-ru0, window)
	res.HostCPUPct = cpu0.BusyPct(cpu1)
	return res
}

func sleepUntil(ctx context.Context, t time.Time) {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-timer.C:
	}
}

// counter is the trivial state machine: it counts applied entries.
type counter struct{ n atomic.Uint64 }

func (c *counter) Apply(*raft.Log) any { c.n.Add(1); return nil }

// ApplyBatch makes counter a raft.BatchingFSM, as fencer's state machine
// is: raft hands it every entry committed together.
func (c *counter) ApplyBatch(logs []*raft.Log) []any {
	c.n.Add(uint64(len(logs)))
	return make([]any, len(logs))
}

func (c *counter) Snapshot() (raft.FSMSnapshot, error) { return counterSnapshot(c.n.Load()), nil }

func (c *counter) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var b [8]byte
	if _, err := io.ReadFull(rc, b[:]); err != nil {
		return err
	}
	c.n.Store(binary.LittleEndian.Uint64(b[:]))
	return nil
}

type counterSnapshot uint64

func (s counterSnapshot) Persist(sink raft.SnapshotSink) error {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(s))
	if _, err := sink.Write(b[:]); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (counterSnapshot) Release() {}
