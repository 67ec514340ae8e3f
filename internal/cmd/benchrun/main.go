// Command benchrun is `make bench`: it measures fencer beside bare raft and
// the peers in one run and prints one table.
//
// It starts a fresh one-node and a fresh three-node fencerd cluster on
// loopback (data in a temp dir on disk), runs every workload of `fencer
// bench` (bench.Workloads: uncontended, contended, rw-read, semaphore) at
// each client count, runs the bare-raft baseline (internal/cmd/raftbench,
// one and three processes) at the same concurrencies, and with -peers runs
// a copy of the peers' benchmark's run-peers.sh (redis, redis-aof-always,
// redlock, etcd; a peerbench checkout named by -peerbench), patched to use
// a fresh owner per acquire for its own fencer targets.
// Every JSON line goes to stdout as it comes and to -results; the table,
// with the ratios docs/performance.md sets goals for, follows on stdout and
// goes to the same name with .md.
//
// Every process it starts is stopped when it is done with it, and all of
// them on failure, on SIGINT and on SIGTERM.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fencerlock/fencer/internal/bench"
)

type options struct {
	binDir      string
	clients     []int
	workloads   []string
	duration    time.Duration
	warmup      time.Duration
	nodes       []int
	raft        bool
	null        bool
	peers       bool
	peerbench   string
	peerTargets string
	baseDir     string
	results     string
	keep        bool
	raftArgs    []string
	// fencerdArgs are added to every fencerd's flags (FENCERD_ARGS);
	// password is --requirepass, given to fencerd and used by the clients.
	fencerdArgs []string
	password    string
}

func main() {
	os.Exit(run())
}

func run() int {
	o, err := parseFlags()
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchrun:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	procs := &bench.Procs{}
	// Stops what is still running on every way out of run, including a
	// panic in a goroutine of ours (which the deferred calls do not see:
	// the children then get SIGTERM from Pdeathsig).
	defer procs.StopAll(bench.StopGrace)

	work, err := os.MkdirTemp(o.baseDir, "fencer-bench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchrun:", err)
		return 1
	}
	defer func() {
		procs.StopAll(bench.StopGrace)
		if o.keep {
			logf("kept %s", work)
		} else {
			os.RemoveAll(work)
		}
	}()
	out, err := newRecorder(o.results)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchrun:", err)
		return 1
	}
	defer out.close()

	fstype := bench.FSType(work)
	logf("work dir %s (%s); results -> %s", work, fstype, o.results)
	if fstype == "tmpfs" {
		logf("WARNING: %s is tmpfs: fsync costs nothing there and the numbers mean nothing; set BASE_DIR", work)
	}
	logf("host: %d cores, load %.2f; clients %v, %v + %v warm-up per run", numCPU(), bench.Load1(), o.clients, o.duration, o.warmup)
	out.emit(bench.ProbeFsync(work, 2000))
	out.emit(bench.ProbeRTT(20000))

	failed := false
	step := func(name string, f func() error) {
		if ctx.Err() != nil {
			return
		}
		if err := f(); err != nil {
			failed = true
			logf("%s: %v", name, err)
		}
	}
	if o.null {
		step("null", func() error { return runNull(ctx, o, out) })
	}
	for _, n := range o.nodes {
		target, raftTarget := "fencer", "raft"
		if n == 1 {
			target, raftTarget = "fencer-1", "raft-1"
		}
		step(target, func() error {
			return runFencer(ctx, o, procs, out, filepath.Join(work, target), target, n)
		})
		if o.raft {
			step(raftTarget, func() error {
				return runRaft(ctx, o, procs, out, filepath.Join(work, raftTarget), raftTarget, n)
			})
		}
	}
	if o.peers {
		step("peers", func() error { return runPeers(ctx, o, procs, out, work) })
	}
	if ctx.Err() != nil {
		logf("interrupted; stopping everything started")
		return 130
	}

	table := bench.Table(out.rows)
	fmt.Println()
	fmt.Print(table)
	if err := os.WriteFile(strings.TrimSuffix(o.results, ".jsonl")+".md", []byte(out.header()+table), 0o644); err != nil {
		logf("writing the table: %v", err)
	}
	if failed || out.bad() {
		return 1
	}
	return 0
}

func parseFlags() (options, error) {
	o := options{}
	env := func(k, def string) string {
		if v := os.Getenv(k); v != "" {
			return v
		}
		return def
	}
	var clients, workloads, nodes, raftArgs string
	flag.StringVar(&o.binDir, "bin", "bin", "directory with fencerd and raftbench")
	flag.StringVar(&clients, "clients", env("CLIENTS", "1 16 256"), "client counts (space- or comma-separated); env CLIENTS")
	flag.StringVar(&workloads, "workloads", env("WORKLOADS", strings.Join(bench.WorkloadNames(false), " ")), "fencer workloads; env WORKLOADS")
	flag.StringVar(&nodes, "nodes", env("NODES", "1 3"), "fencer and raft cluster sizes; env NODES")
	dur := flag.String("duration", env("DURATION", "5s"), "measured window of each run; env DURATION")
	warm := flag.String("warmup", env("WARMUP", "1s"), "unmeasured warm-up before each run; env WARMUP")
	flag.BoolVar(&o.raft, "raft", env("RAFT", "1") == "1", "run the bare-raft baseline; env RAFT=0 skips it")
	flag.BoolVar(&o.null, "null", env("NULL", "1") == "1", "measure the harness against a server that does nothing (target null); env NULL=0 skips it")
	flag.BoolVar(&o.peers, "peers", env("PEERS", "0") == "1", "also run peerbench's targets; env PEERS=1")
	flag.StringVar(&o.peerbench, "peerbench", env("PEERBENCH", "../shared/peerbench"), "peerbench's directory (read only; a patched copy is run); env PEERBENCH")
	flag.StringVar(&o.peerTargets, "peer-targets", env("PEER_TARGETS", "redis redis-aof-always redlock etcd"), "peerbench targets; env PEER_TARGETS")
	flag.StringVar(&o.baseDir, "base-dir", env("BASE_DIR", "/var/tmp"), "where the temp dir goes (not tmpfs); env BASE_DIR")
	flag.StringVar(&o.results, "results", env("RESULTS", ""), "JSON-lines file (default bin/bench-<UTC time>.jsonl); the table goes beside it as .md; env RESULTS")
	flag.BoolVar(&o.keep, "keep", env("KEEP_WORK", "0") == "1", "keep the temp dir (logs, data); env KEEP_WORK=1")
	flag.StringVar(&raftArgs, "raft-args", env("RAFT_ARGS", ""), "raftbench flags that change fencerd's raft settings for the baseline, e.g. --max-append-entries=1024; env RAFT_ARGS")
	var fencerdArgs string
	flag.StringVar(&fencerdArgs, "fencerd-args", env("FENCERD_ARGS", ""), "flags added to every fencerd's (e.g. --ui 127.0.0.1:7390, to measure with the web console open); env FENCERD_ARGS")
	flag.StringVar(&o.password, "requirepass", env("REQUIREPASS", ""), "run fencerd with --requirepass and the clients with AUTH (the console needs a password); env REQUIREPASS")
	flag.Parse()
	o.fencerdArgs = strings.Fields(fencerdArgs)
	if o.password != "" {
		o.fencerdArgs = append(o.fencerdArgs, "--requirepass", o.password)
		bench.SetPassword(o.password)
	}
	var err error
	if o.duration, err = time.ParseDuration(*dur); err != nil || o.duration <= 0 {
		return o, fmt.Errorf("bad duration %q", *dur)
	}
	if o.warmup, err = time.ParseDuration(*warm); err != nil || o.warmup < 0 {
		return o, fmt.Errorf("bad warmup %q", *warm)
	}
	if o.clients, err = ints(clients); err != nil {
		return o, fmt.Errorf("clients: %w", err)
	}
	if o.nodes, err = ints(nodes); err != nil {
		return o, fmt.Errorf("nodes: %w", err)
	}
	for _, n := range o.nodes {
		if n != 1 && n != 3 {
			return o, fmt.Errorf("nodes: %d: only 1 and 3 have targets (fencer-1, fencer)", n)
		}
	}
	if o.binDir, err = filepath.Abs(o.binDir); err != nil {
		return o, err
	}
	o.workloads = strings.Fields(strings.ReplaceAll(workloads, ",", " "))
	for _, wl := range o.workloads {
		if _, ok := bench.LookupWorkload(wl); !ok {
			return o, fmt.Errorf("workloads: %w", bench.UnknownWorkload(wl))
		}
	}
	o.raftArgs = strings.Fields(raftArgs)
	if o.results == "" {
		o.results = filepath.Join(o.binDir, "bench-"+time.Now().UTC().Format("20060102T150405Z")+".jsonl")
	}
	return o, nil
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Fields(strings.ReplaceAll(s, ",", " ")) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("none given")
	}
	return out, nil
}

func runFencer(ctx context.Context, o options, procs *bench.Procs, out *recorder, dir, target string, n int) error {
	logf("== %s: starting %d fencerd node(s) in %s", target, n, dir)
	c, err := bench.StartFencer(ctx, procs, filepath.Join(o.binDir, "fencerd"), dir, n, o.fencerdArgs...)
	if c != nil {
		defer c.Stop()
	}
	if err != nil {
		return err
	}
	// The clients talk to the leader, as peerbench's fencer target does (it
	// uses the first node, which bootstrapped the cluster and leads it).
	leader, err := bench.LeaderAddr(c.Nodes[0].Addr)
	if err != nil {
		return err
	}
	for _, wl := range o.workloads {
		for _, clients := range o.clients {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			logf("run %s/%s: clients=%d", target, wl, clients)
			out.emit(bench.Run(ctx, bench.Config{Addrs: []string{leader}, Target: target, Workload: wl,
				Clients: clients, Duration: o.duration, Warmup: o.warmup}))
		}
	}
	return nil
}

func runRaft(ctx context.Context, o options, procs *bench.Procs, out *recorder, dir, target string, n int) error {
	// raftbench runs on fencerd's raft settings (server.RaftConfig and
	// friends, compiled in); RAFT_ARGS changes them.
	logf("== %s: starting %d raftbench node(s) in %s with %q", target, n, dir, o.raftArgs)
	c, err := bench.StartRaft(ctx, procs, filepath.Join(o.binDir, "raftbench"), dir, target, n, o.raftArgs...)
	if c != nil {
		defer c.Stop()
	}
	if err != nil {
		return err
	}
	for _, clients := range o.clients {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		logf("run %s/commits: concurrent applies=%d", target, clients)
		out.emit(c.Run(ctx, clients, o.warmup, o.duration))
	}
	return nil
}

// runNull measures the harness against NullServer at the largest client
// count: its ceiling on this machine.
func runNull(ctx context.Context, o options, out *recorder) error {
	s, err := bench.StartNullServer()
	if err != nil {
		return err
	}
	defer s.Close()
	clients := o.clients[len(o.clients)-1]
	logf("== null: the harness against a server that answers at once, clients=%d", clients)
	out.emit(bench.Run(ctx, bench.Config{Addrs: []string{s.Addr()}, Target: "null", Workload: bench.Uncontended,
		Clients: clients, Duration: min(o.duration, 2*time.Second), Warmup: min(o.warmup, 500*time.Millisecond)}))
	return nil
}

// recorder prints each JSON line, appends it to the results file and keeps
// the rows for the table.
type recorder struct {
	f      *os.File
	rows   []bench.Row
	probes []bench.ProbeResult
	errors int
}

func newRecorder(path string) (*recorder, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &recorder{f: f}, nil
}

func (r *recorder) emit(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		logf("json: %v", err)
		return
	}
	r.line(b)
}

// line records one JSON line from any source.
func (r *recorder) line(b []byte) {
	fmt.Println(string(b))
	fmt.Fprintln(r.f, string(b))
	if row, ok := bench.ParseRow(b); ok {
		r.rows = append(r.rows, row)
		if row.Error != "" || row.Overlaps > 0 || row.Regressions > 0 {
			r.errors++
		}
		return
	}
	var p bench.ProbeResult
	if json.Unmarshal(b, &p) == nil && p.Probe != "" {
		r.probes = append(r.probes, p)
	}
}

// bad reports a run that failed or broke a safety check.
func (r *recorder) bad() bool { return r.errors > 0 }

// header describes the machine for the .md file.
func (r *recorder) header() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Measured %s on %d cores.\n", time.Now().UTC().Format(time.RFC3339), numCPU())
	for _, p := range r.probes {
		fmt.Fprintf(&b, "Probe %s (%s): p50 %d µs, p99 %d µs.\n", p.Probe, p.Detail, p.P50, p.P99)
	}
	b.WriteString("\n")
	return b.String()
}

func (r *recorder) close() { r.f.Close() }

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "# "+format+"\n", args...)
}
