package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencerlock/fencer/internal/testbin"
	"github.com/fencerlock/fencer/server"
)

// Binaries built once by TestMain: the real fencerd and the baseline node.
var fencerdBin, raftbenchBin string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "fencer-bench-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	fencerdBin, raftbenchBin = filepath.Join(dir, "fencerd"), filepath.Join(dir, "raftbench")
	if err := errors.Join(
		testbin.Build(fencerdBin, "cmd/fencerd"),
		testbin.Build(raftbenchBin, "internal/cmd/raftbench"),
	); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// startFencer starts an n-node fencerd cluster for the test.
func startFencer(t *testing.T, n int) *FencerCluster {
	t.Helper()
	procs := &Procs{}
	t.Cleanup(func() { procs.StopAll(StopGrace) })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := StartFencer(ctx, procs, fencerdBin, t.TempDir(), n)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// checkClean asserts what every run against a correct server must show.
func checkClean(t *testing.T, r Result) {
	t.Helper()
	if r.Error != "" || r.Errors != 0 || r.WarmupErrors != 0 {
		t.Errorf("run failed: error %q, %d errors, %d warm-up errors, first %q", r.Error, r.Errors, r.WarmupErrors, r.FirstError)
	}
	if r.Overlaps != 0 || r.TokenRegressions != 0 {
		t.Errorf("%d overlaps, %d token regressions; want none", r.Overlaps, r.TokenRegressions)
	}
	if r.Ops == 0 || r.OpsPerS <= 0 || r.AcqP50 <= 0 || r.AcqP99 < r.AcqP50 || r.AcqMax < r.AcqP999 {
		t.Errorf("implausible figures: %+v", r)
	}
}

func TestUncontendedAgainstFencerd(t *testing.T) {
	t.Parallel()
	c := startFencer(t, 1)
	r := Run(context.Background(), Config{Addrs: c.Addrs(), Target: "fencer-1", Workload: Uncontended,
		Clients: 4, Keys: 2, Duration: 700 * time.Millisecond, Warmup: 200 * time.Millisecond})
	checkClean(t, r)
	if r.Target != "fencer-1" || r.Clients != 4 || r.Keys != 0 || r.HandoffsPerS != 0 {
		t.Errorf("result header %+v", r)
	}
	// Each client cycles through 2 names with a fresh owner each time, so
	// every name is re-acquired many times: fencer's release memory would
	// refuse a reused owner, which would show as errors above.
	if r.Ops < 8 {
		t.Errorf("only %d pairs in the window", r.Ops)
	}
	if r.LastToken == 0 {
		t.Error("no token seen")
	}
}

func TestContendedAgainstFencerd(t *testing.T) {
	t.Parallel()
	c := startFencer(t, 1)
	r := Run(context.Background(), Config{Addrs: c.Addrs(), Workload: Contended,
		Clients: 4, Duration: 700 * time.Millisecond, Warmup: 200 * time.Millisecond})
	checkClean(t, r)
	if r.Target != "fencer" || r.Keys != 1 {
		t.Errorf("result header %+v", r)
	}
	// Waiters queue FIFO on the server, so the lock passes from client to
	// client: nearly every grant is a handoff.
	if r.HandoffsPerS < 0.5*r.OpsPerS {
		t.Errorf("handoffs/s %.1f of %.1f pairs/s; want most of them", r.HandoffsPerS, r.OpsPerS)
	}
}

func TestThreeNodeFencerThroughFollower(t *testing.T) {
	t.Parallel()
	c := startFencer(t, 3)
	if len(c.Nodes) != 3 {
		t.Fatalf("%d nodes", len(c.Nodes))
	}
	leader, err := LeaderAddr(c.Nodes[2].Addr)
	if err != nil {
		t.Fatal(err)
	}
	if leader != c.Nodes[0].Addr {
		t.Logf("leader is %s, not the bootstrapping node", leader)
	}
	// Clients 0 and 1 talk to followers (forwarded), 2 to the leader.
	addrs := []string{c.Nodes[1].Addr, c.Nodes[2].Addr, c.Nodes[0].Addr}
	r := Run(context.Background(), Config{Addrs: addrs, Workload: Contended, Clients: 3,
		Duration: 500 * time.Millisecond, Warmup: 200 * time.Millisecond})
	checkClean(t, r)
}

func TestRaftBaseline(t *testing.T) {
	t.Parallel()
	procs := &Procs{}
	t.Cleanup(func() { procs.StopAll(StopGrace) })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := StartRaft(ctx, procs, raftbenchBin, t.TempDir(), "raft", 3)
	if err != nil {
		t.Fatal(err)
	}
	r := c.Run(ctx, 4, 200*time.Millisecond, 500*time.Millisecond)
	if r.Error != "" || r.Errors != 0 {
		t.Fatalf("baseline failed: %+v", r)
	}
	if r.Target != "raft" || r.Workload != "commits" || r.Nodes != 3 || r.Clients != 4 {
		t.Errorf("result header %+v", r)
	}
	if r.Commits == 0 || r.CommitsPerS <= 0 || r.CommitP50 <= 0 || r.CommitP99 < r.CommitP50 {
		t.Errorf("implausible figures: %+v", r)
	}
	// fencerd's settings: fsync on, its LogCache and raft.Config.
	want := server.RaftConfig(server.DefaultConfig())
	if r.NoSync || r.LogCache != server.RaftLogCacheSize || r.EntryBytes != 64 ||
		r.MaxAppendEntries != want.MaxAppendEntries || r.BatchApplyCh != want.BatchApplyCh {
		t.Errorf("settings %+v", r)
	}
	c.Stop()
	for _, p := range c.nodes {
		if !p.Done() {
			t.Errorf("%s still running after Stop", p.Name)
		}
	}
}

func TestNullServerCeiling(t *testing.T) {
	s, err := StartNullServer()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := Run(context.Background(), Config{Addrs: []string{s.Addr()}, Target: "null", Workload: Uncontended,
		Clients: 4, Duration: 300 * time.Millisecond, Warmup: 50 * time.Millisecond})
	checkClean(t, r)
	if r.Ops < 100 {
		t.Errorf("only %d pairs against a server that does nothing", r.Ops)
	}
}

func TestTokenRegressionDetected(t *testing.T) {
	s, err := StartNullServer()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.token.Store(1 << 62)
	s.frozen = true // every grant gets the same token
	for _, wl := range []string{Uncontended, Contended} {
		r := Run(context.Background(), Config{Addrs: []string{s.Addr()}, Workload: wl,
			Clients: 2, Keys: 1, Duration: 200 * time.Millisecond, Warmup: 10 * time.Millisecond})
		if r.TokenRegressions == 0 {
			t.Errorf("%s: a server that repeats its token went unnoticed: %+v", wl, r)
		}
	}
}

func TestRunInterrupted(t *testing.T) {
	s, err := StartNullServer()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	r := Run(ctx, Config{Addrs: []string{s.Addr()}, Workload: Uncontended, Clients: 2, Duration: time.Minute})
	if !strings.HasPrefix(r.Error, "interrupted") {
		t.Errorf("error %q, want interrupted", r.Error)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v to stop", d)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []Config{
		{Workload: Uncontended, Clients: 1, Duration: time.Second},
		{Addrs: []string{"x"}, Workload: "both", Clients: 1, Duration: time.Second},
		{Addrs: []string{"x"}, Workload: Contended, Clients: 0, Duration: time.Second},
		{Addrs: []string{"x"}, Workload: Contended, Clients: 1},
	} {
		if r := Run(context.Background(), cfg); r.Error == "" {
			t.Errorf("%+v: no error", cfg)
		}
	}
}

func TestProcsStopAll(t *testing.T) {
	procs := &Procs{}
	dir := t.TempDir()
	// One exits on SIGTERM; the other ignores it and has a child of its own,
	// which must go too.
	plain, err := procs.Start("sleep", dir, filepath.Join(dir, "a.log"), false, "sleep", "60")
	if err != nil {
		t.Fatal(err)
	}
	stubborn, err := procs.Start("stubborn", dir, filepath.Join(dir, "b.log"), true, "sh", "-c",
		`trap "" TERM; sleep 60 & echo $!; wait`)
	if err != nil {
		t.Fatal(err)
	}
	line, err := stubborn.Stdout.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	grandchild := strings.TrimSpace(line)
	start := time.Now()
	procs.StopAll(300 * time.Millisecond)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("StopAll took %v", d)
	}
	if !plain.Done() || !stubborn.Done() {
		t.Fatal("a child is still running after StopAll")
	}
	deadline := time.Now().Add(5 * time.Second)
	for alive(grandchild) {
		if time.Now().After(deadline) {
			t.Fatalf("grandchild %s survived StopAll", grandchild)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := procs.Start("late", dir, filepath.Join(dir, "c.log"), false, "true"); !errors.Is(err, errStopped) {
		t.Errorf("Start after StopAll: %v", err)
	}
}

func TestProcsPipeReadsToTheEnd(t *testing.T) {
	procs := &Procs{}
	defer procs.StopAll(StopGrace)
	dir := t.TempDir()
	for i := range 20 {
		p, err := procs.Start("printer", dir, filepath.Join(dir, "p.log"), true, "sh", "-c", "echo first; echo last")
		if err != nil {
			t.Fatal(err)
		}
		<-p.Exited() // what it wrote is still there to read
		var got []string
		for {
			line, err := p.Stdout.ReadString('\n')
			if line != "" {
				got = append(got, strings.TrimSpace(line))
			}
			if err != nil {
				break
			}
		}
		if strings.Join(got, ",") != "first,last" {
			t.Fatalf("run %d: read %q", i, got)
		}
	}
}

// alive reports a process that exists and is not a zombie.
func alive(pid string) bool {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(rest, "Z")
}
