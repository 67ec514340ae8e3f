//go:build linux

package chaos

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/fencerlock/fencer/internal/testbin"
)

// The soak: a three-node cluster under the campaign's workloads, the Go
// client's leases and a slowly growing and shrinking lock set, with a fault
// from the campaign's deck every minute, for SOAK_DURATION. Every
// SOAK_SAMPLE it samples each node's resident memory, goroutines, open
// file descriptors, and Raft log and snapshots on disk (soaksample_test.go)
// into soak.csv, and at the end plots them (soak.png) and fits a line to
// the second half of each series (soakfit_test.go, summary.txt). It fails
// on any violation the campaign's checkers find and, in a run of
// soakGrowthAfter or more, on a series that grows beyond its tolerance.
//
// The bounded structures run with their limits lowered so that each
// reaches its bound early in the run and the plot shows it flatten:
// snapshots every soakSnapshotThreshold entries, soakTrailingLogs entries
// kept behind each, and a release memory of soakReleaseWindow positions and
// soakReleaseMax releases. The release memory's bounds are constants of
// fsm that every node must share (it must forget at the same log
// position), so they are lowered only in the fencer_faults build
// (fsm/release_faults.go), which the soak runs with the same environment
// on every node; that build behaves as shipped otherwise.
//
// Without SOAK_DURATION a short soak runs with the package's tests: it
// checks the machinery and the checkers, and reports the fits without
// judging them.
const (
	soakNodes         = 3
	soakShortDuration = 75 * time.Second
	soakShortSample   = 2 * time.Second
	soakSample        = 10 * time.Second
	// soakGrowthAfter: a run this long or longer fails on growth. A
	// shorter one has no bound-reached half to fit.
	soakGrowthAfter = 10 * time.Minute
	soakFaultEvery  = time.Minute
	// The short soak deals a fault every 12-18 s instead.
	soakShortFaultMin = 12 * time.Second
	soakShortFaultMax = 18 * time.Second
	// soakClientsPerNode campaign clients per node (the campaign has six);
	// soakLeaseClients Go clients in all, and one lock set.
	soakClientsPerNode = 5
	soakLeaseClients   = 3

	soakSnapshotThreshold = "1024"
	soakTrailingLogs      = "1024"
	soakReleaseWindow     = "131072"
	soakReleaseMax        = "2048"
)

// soakConfig is one soak's settings.
type soakConfig struct {
	duration, sample       time.Duration
	faultMin, faultMax     time.Duration
	seed                   uint64
	out                    string // where soak.csv, soak.png, summary.txt go; "" for the data directory
	growthEnforced         bool
	lockSetPeak            int
	lockSetPeriod          time.Duration
	clientsPerNode, leases int
}

// faultEvery says how often faults come: "1m0s", or "12s-18s".
func (cfg soakConfig) faultEvery() string {
	if cfg.faultMin == cfg.faultMax {
		return cfg.faultMax.String()
	}
	return cfg.faultMin.String() + "-" + cfg.faultMax.String()
}

// envSoak reads SOAK_DURATION, SOAK_SAMPLE, SOAK_OUT and SOAK_SEED.
func envSoak(t *testing.T) soakConfig {
	t.Helper()
	cfg := soakConfig{duration: soakShortDuration, sample: soakShortSample, faultMin: soakShortFaultMin, faultMax: soakShortFaultMax,
		seed: envSeed(t, "SOAK_SEED"), clientsPerNode: soakClientsPerNode, leases: soakLeaseClients}
	if d, set := envDuration(t, "SOAK_DURATION"); set {
		cfg.duration, cfg.sample = d, soakSample
		cfg.faultMin, cfg.faultMax = soakFaultEvery, soakFaultEvery
	}
	if d, set := envDuration(t, "SOAK_SAMPLE"); set {
		cfg.sample = d
	}
	if out := os.Getenv("SOAK_OUT"); out != "" {
		if !filepath.IsAbs(out) {
			root, err := testbin.ModuleRoot()
			if err != nil {
				t.Fatal(err)
			}
			out = filepath.Join(root, out)
		}
		cfg.out = out
	}
	cfg.growthEnforced = cfg.duration >= soakGrowthAfter
	cfg.lockSetPeak = lockSetPeak
	if cfg.duration < soakGrowthAfter {
		cfg.lockSetPeak = lockSetShortPeak
	}
	cfg.lockSetPeriod = lockSetPeriod(cfg.duration)
	return cfg
}

// soakBin writes, into dir, a script that runs the fencer_faults build
// with the soak's lowered limits added to the flags startCluster gives
// every node (of two equal flags the later wins). It execs, so the pid
// stays fencerd's.
func soakBin(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "fencerd-soak")
	script := fmt.Sprintf("#!/bin/sh\nexec '%s' \"$@\" --snapshot-threshold %s --raft-trailing-logs %s\n",
		faultyBin, soakSnapshotThreshold, soakTrailingLogs)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSoak runs the soak; see the comment at the top of this file and
// docs/operations.md (Soak). `make soak` runs an hour of it.
func TestSoak(t *testing.T) {
	requireRoot(t)
	cfg := envSoak(t)
	t.Logf("soak: %d nodes, %v, a sample every %v, a fault every %s, seed %d (SOAK_SEED=%d draws the same faults again)",
		soakNodes, cfg.duration, cfg.sample, cfg.faultEvery(), cfg.seed, cfg.seed)
	dir := runDir(t, "fencer-soak-")
	out := cfg.out
	if out == "" {
		out = dir
	} else if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := startCluster(clusterConfig{nodes: soakNodes, bin: soakBin(t, dir), dir: dir, env: []string{
		"FENCER_RELEASE_MEMORY_WINDOW=" + soakReleaseWindow,
		"FENCER_RELEASE_MEMORY_MAX=" + soakReleaseMax,
	}})
	if err != nil {
		t.Fatalf("starting the cluster: %v", err)
	}
	t.Cleanup(c.teardown)

	// The data stays on the real disk, whose sizes the samples are about,
	// so the deck is dealt without the power cuts, which need lazyfs. The
	// first fault kills the leader, as the campaign's does: a short run's
	// few faults may otherwise all miss the leader, and the run checks that
	// the cluster went through a leader change.
	camp := campaign{nodes: soakNodes, duration: cfg.duration, seed: cfg.seed, clientsPerNode: cfg.clientsPerNode,
		workloads: []workloadKind{wlLinearizable, wlExpiry, wlFenced, wlRedisLua, wlRedsync}, first: killLeader,
		kinds: slices.DeleteFunc(slices.Clone(deck), func(k faultKind) bool { return slices.Contains(powerCuts, k) })}
	rep := &report{cfg: camp, dir: dir, count: &counters{}}
	clk := clock{start: time.Now()}
	w := newWorkloads()
	leases := &leaseWorkload{grants: w.grants, fenced: w.fenced}
	set := &lockSet{grants: w.grants, peak: cfg.lockSetPeak, period: cfg.lockSetPeriod,
		ttl: min(cfg.duration+time.Hour, 24*time.Hour)}

	sm, err := newSampler(c, clk, cfg.sample, filepath.Join(out, "soak.csv"))
	if err != nil {
		t.Fatal(err)
	}
	samplerStop, samplerDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(samplerDone)
		sm.run(samplerStop)
	}()

	clients := newCrowd(c, clk, cfg.seed, rep.count)
	w.spawn(clients, c, cfg.clientsPerNode, camp.workloads)
	for i := range cfg.leases {
		clients.spawn(i%soakNodes, func(cl *client) { leases.run(cl, c, clients.stop) })
	}
	// The lock set's client outlives the run: its check reads the keys
	// still held.
	setClient := clients.add(0)
	dialAnyUp(setClient, c)
	clients.wg.Go(func() { set.run(setClient, clients.stop) })

	nm := &nemesis{c: c, clk: clk, rng: newRand(cfg.seed), fenced: w.fenced, kinds: camp.kinds,
		everyMin: cfg.faultMin, everyMax: cfg.faultMax}
	nm.runFor(cfg.duration)
	// The fault in progress ran over the duration; a little quiet time on
	// a whole cluster, then stop the clients and the sampling.
	time.Sleep(2 * time.Second)
	close(clients.stop)
	close(samplerStop)
	<-samplerDone
	clients.wait(t)
	rep.elapsed = time.Duration(clk.now())
	if err := sm.err(); err != nil {
		t.Errorf("writing soak.csv: %v", err)
	}

	rep.settle(t, c)

	// The lock set reads its keys and adds its grants first, so that the
	// other checkers see them.
	setResult := set.check(setClient)
	setClient.conn.close()
	all := w.grants.all()
	rep.tally(all, nm)
	rep.results = append(rep.results, w.lin.check(dir), checkEarlyExpiryWindows(all, soakExpiryWindow), w.fenced.check(),
		checkTokens(all, nm.restarts), checkStateHashes(rep.hashes, rep.convergeErr), setResult)
	rep.readLogs(c)

	fits := fitSamples(sm.all(), cfg.duration/2)
	summary := soakSummary(cfg, rep, fits)
	t.Log("\n" + summary)
	if err := os.WriteFile(filepath.Join(out, "summary.txt"), []byte(summary), 0o644); err != nil {
		t.Errorf("writing summary.txt: %v", err)
	}
	if err := plotSamples(sm.all(), fits, cfg, filepath.Join(out, "soak.png")); err != nil {
		if cfg.growthEnforced {
			t.Errorf("plotting: %v", err)
		} else {
			t.Logf("no plot: %v", err)
		}
	}
	t.Logf("soak.csv, soak.png and summary.txt are in %s", out)

	assertClean(t, rep, max(1, int(cfg.duration/(5*time.Minute))))
	if cfg.growthEnforced {
		for _, f := range fits {
			if !f.g.ok() {
				t.Errorf("%s %s grew %s over the second half (%s an hour), more than its tolerance of %s",
					f.node, f.m.name, f.m.format(f.g.grown), f.m.format(f.g.perHour), f.m.format(f.g.tolerance))
			}
		}
	}
}

// soakExpiryWindow is the window checkEarlyExpiryWindows checks at a time.
const soakExpiryWindow = 10 * time.Second

// checkEarlyExpiryWindows runs checkEarlyExpiry over the run one window at
// a time: on the grants that returned in the window, with every grant that
// was requested before its end and still held and valid at its start. An
// hour of grants at once would take hours: the checker compares every pair
// of grants of a key, and the soak's busiest keys get hundreds of
// thousands. Every pair that can break the rule is compared: the later
// grant returned in some window, and the earlier one, still valid and
// unreleased then, was requested before that grant returned (its token is
// the smaller; checkTokens holds the grants to that). A pair met in more
// than one window is reported once.
func checkEarlyExpiryWindows(grants []grant, window time.Duration) checkResult {
	res := checkResult{name: "no early expiry", checked: len(grants)}
	var end int64
	for _, g := range grants {
		end = max(end, g.ret)
	}
	seen := make(map[string]bool)
	for w0 := int64(0); w0 <= end; w0 += int64(window) {
		w1 := w0 + int64(window)
		var in []grant
		for _, g := range grants {
			if g.call < w1 && max(g.ret, min(g.released, g.validUntil)) >= w0 {
				in = append(in, g)
			}
		}
		for _, v := range checkEarlyExpiry(in).violations {
			if !seen[v] {
				seen[v] = true
				res.violations = append(res.violations, v)
			}
		}
	}
	res.notes = append(res.notes, fmt.Sprintf("checked in windows of %v", window))
	return res
}

// seriesFit is the growth fit of one node's series of one metric.
type seriesFit struct {
	node string
	m    soakMetric
	g    growth
}

// fitSamples fits every node's series of every metric from from on.
func fitSamples(samples []sample, from time.Duration) []seriesFit {
	var out []seriesFit
	for _, m := range soakMetrics {
		for node := range soakNodes {
			var ts []time.Duration
			var ys []float64
			for _, s := range samples {
				if s.node == node {
					ts = append(ts, s.at)
					ys = append(ys, m.value(s))
				}
			}
			out = append(out, seriesFit{node: fmt.Sprintf("n%d", node+1), m: m, g: fitGrowth(ts, ys, from, m.tol)})
		}
	}
	return out
}

// soakSummary is summary.txt: the settings, the campaign's summary, and
// the fits.
func soakSummary(cfg soakConfig, rep *report, fits []seriesFit) string {
	var b strings.Builder
	fmt.Fprintf(&b, "soak: %d nodes, %v, a fault every %s, a sample every %v\n",
		soakNodes, cfg.duration, cfg.faultEvery(), cfg.sample)
	fmt.Fprintf(&b, "limits: snapshot every %s entries, %s kept behind it, release memory %s positions / %s releases\n",
		soakSnapshotThreshold, soakTrailingLogs, soakReleaseWindow, soakReleaseMax)
	fmt.Fprintf(&b, "clients beside the campaign's: %d Go client leases (auto-renew), one lock set (0-%d keys, period %v)\n\n",
		cfg.leases, cfg.lockSetPeak, cfg.lockSetPeriod.Round(time.Second))
	b.WriteString(rep.summary())
	b.WriteString("\n")
	verdict := fmt.Sprintf("judged: the run is at least %v", soakGrowthAfter)
	if !cfg.growthEnforced {
		verdict = fmt.Sprintf("not judged: the run is shorter than %v", soakGrowthAfter)
	}
	fmt.Fprintf(&b, "growth over the second half (from +%v), fitted by least squares; %s\n",
		(cfg.duration / 2).Round(time.Second), verdict)
	tw := tabwriter.NewWriter(&b, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "metric\tnode\tmean\tslope/h\tgrowth\ttolerance\tverdict\t\n")
	for _, f := range fits {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", f.m.name, f.node, f.m.format(f.g.mean), f.m.format(f.g.perHour),
			f.m.format(f.g.grown), f.m.format(f.g.tolerance), f.g.verdict())
	}
	tw.Flush()
	b.WriteString("tolerance: the larger of")
	for i, m := range soakMetrics {
		sep := ";"
		if i == len(soakMetrics)-1 {
			sep = "\n"
		}
		fmt.Fprintf(&b, " %s %.0f%% of the mean or %s%s", m.name, m.tol.rel*100, m.format(m.tol.floor), sep)
	}
	return b.String()
}

// soakMetric is one sampled quantity.
type soakMetric struct {
	name, unit string
	scale      float64 // unit per value: 1<<20 for MiB
	tol        tolerance
	value      func(sample) float64
}

// format renders v in the metric's unit.
func (m soakMetric) format(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	if m.scale == 1 {
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v/m.scale, 'f', 1, 64) + " " + m.unit
}

// The metrics and their tolerances (docs/operations.md, Soak, says why these).
var soakMetrics = []soakMetric{
	{name: "rss", unit: "MiB", scale: 1 << 20, tol: tolerance{rel: 0.10, floor: 16 << 20}, value: func(s sample) float64 { return s.rss }},
	{name: "goroutines", scale: 1, tol: tolerance{rel: 0.10, floor: 50}, value: func(s sample) float64 { return s.goroutines }},
	{name: "fds", scale: 1, tol: tolerance{rel: 0.10, floor: 40}, value: func(s sample) float64 { return s.fds }},
	// The WAL grows by whole preallocated segments (64 MiB): less than one
	// is not growth the disk shows.
	{name: "log", unit: "MiB", scale: 1 << 20, tol: tolerance{rel: 0.10, floor: 64 << 20}, value: func(s sample) float64 { return s.logBytes }},
	// Entries since the last snapshot plus the trailing ones: they saw-tooth
	// between the trailing logs and that plus the snapshot threshold (1024
	// each in the soak), so a rise of less than both together is no growth.
	{name: "log entries", scale: 1, tol: tolerance{rel: 0.10, floor: 2048}, value: func(s sample) float64 { return s.logEntries }},
	{name: "snapshots", unit: "KiB", scale: 1 << 10, tol: tolerance{rel: 0.10, floor: 64 << 10}, value: func(s sample) float64 { return s.snapBytes }},
}

// TestCheckEarlyExpiryWindows: window by window, the check finds what the
// whole check finds, on a made-up history of short and long leases, slow
// replies and late or missing releases, with plenty of early grants.
func TestCheckEarlyExpiryWindows(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var grants []grant
	now := int64(0)
	for i := range 4000 {
		ttl := time.Duration(200+rng.IntN(2000)) * time.Millisecond
		if rng.IntN(100) == 0 {
			ttl = time.Hour
		}
		// Tokens in the order of the calls: checkTokens holds real grants
		// to that.
		g := grant{key: fmt.Sprintf("k%d", rng.IntN(30)), owner: fmt.Sprintf("o%d", i), token: uint64(i + 1), ttl: ttl, call: now}
		g.ret = g.call + rng.Int64N(int64(3*time.Second))
		g.validUntil = g.call + int64(ttl)
		g.released = math.MaxInt64
		if rng.IntN(10) != 0 {
			g.released = g.ret + rng.Int64N(int64(300*time.Millisecond))
		}
		grants = append(grants, g)
		now += rng.Int64N(int64(40 * time.Millisecond))
	}
	want := checkEarlyExpiry(grants).violations
	got := checkEarlyExpiryWindows(grants, time.Second).violations
	slices.Sort(want)
	want = slices.Compact(want)
	slices.Sort(got)
	if len(want) == 0 {
		t.Fatal("the made-up history has no early grant to find")
	}
	if !slices.Equal(got, want) {
		t.Errorf("windows found %d violations, the whole check %d", len(got), len(want))
	} else {
		t.Logf("both found the same %d violations", len(want))
	}
}
