//go:build linux

package chaos

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Defaults of the campaign when go test runs it without CHAOS_* settings: a
// short run per cluster size, so that the package stays within a few
// minutes in CI. `make chaos` runs minutes per size.
const (
	defaultDuration = 30 * time.Second
	defaultClients  = 6
	// maxRecovery bounds the time from a leader's death to the first
	// acknowledged write. Raft elects within one to three seconds; the rest
	// is margin for a loaded machine.
	maxRecovery = 10 * time.Second
	// drainTimeout bounds the wait for the clients to finish after stop.
	drainTimeout = 90 * time.Second
)

// workloadKind selects a workload.
type workloadKind int

const (
	wlLinearizable workloadKind = iota
	wlExpiry
	wlFenced
	wlRedisLua  // Redis-compatible: SET NX, Lua extend and release
	wlRedsync   // Redis-compatible: go-redsync/redsync
	wlSessions  // locks under sessions (session_test.go)
	wlElection  // an election through the Go client (election_test.go)
	wlRWLock    // read-write locks (shared_test.go)
	wlSemaphore // a semaphore (shared_test.go)
	// wlRedsyncEvery: go-redsync/redsync given every node's address as if
	// they were independent masters (needs --redlock-multi-endpoint).
	wlRedsyncEvery
)

// campaign is one run's configuration.
type campaign struct {
	nodes          int
	duration       time.Duration
	seed           uint64
	clientsPerNode int
	bin            string
	env            []string
	workloads      []workloadKind
	kinds          []faultKind // the deck
	first          faultKind   // the first fault, if set
	// lazy puts the data directories on lazyfs (CHAOS_LAZYFS=0: the real
	// disk, and no power cuts).
	lazy bool
	// args are extra fencerd flags.
	args []string
}

// outcome of a run: figures and what the checkers found.
type report struct {
	cfg           campaign
	dir           string
	elapsed       time.Duration
	count         *counters
	grants        map[string]int
	faults        []fault
	restarts      int
	leaderChanges int
	snapsTaken    int
	snapsInstall  int
	results       []checkResult
	hashes        []stateHash
	convergeErr   error
	badLogs       []string
	nemesisErrs   []string
	logFiles      int
}

// settle heals every fault, then waits for the cluster to list all its
// members and for every node to reach the same state, which it records.
func (r *report) settle(t *testing.T, c *cluster) {
	t.Helper()
	if err := c.nw.heal(); err != nil {
		t.Fatalf("healing: %v", err)
	}
	if err := c.awaitMembers(formTimeout); err != nil {
		r.nemesisErrs = append(r.nemesisErrs, "at the end: "+err.Error())
	}
	r.hashes, r.convergeErr = c.awaitConverged(formTimeout)
}

// tally records the grants per workload, and what the nemesis did.
func (r *report) tally(grants []grant, nm *nemesis) {
	r.grants = make(map[string]int)
	for _, g := range grants {
		r.grants[g.workload]++
	}
	r.faults, r.restarts, r.nemesisErrs = nm.faults, len(nm.restarts), append(r.nemesisErrs, nm.errs...)
}

// readLogs records what the nodes' logs show: lines that must not appear,
// leader changes and snapshots.
func (r *report) readLogs(c *cluster) {
	for _, n := range c.nodes {
		r.badLogs = append(r.badLogs, n.badLogLines()...)
		r.leaderChanges += n.countInLogs("leader ready")
		r.snapsTaken += n.countInLogs("snapshot complete up to")
		r.snapsInstall += n.countInLogs("Installed remote snapshot")
		r.logFiles += n.starts
		r.nemesisErrs = append(r.nemesisErrs, n.unexpectedExits()...)
	}
	r.leaderChanges-- // the first election is not a change
}

// violations returns the violations of the checker whose name starts with
// prefix.
func (r *report) violations(prefix string) []string {
	var out []string
	for _, res := range r.results {
		if strings.HasPrefix(res.name, prefix) {
			out = append(out, res.violations...)
		}
	}
	return out
}

// envCampaign reads the CHAOS_* settings for a cluster of n nodes; ok is
// false if CHAOS_NODES leaves n out.
func envCampaign(t *testing.T, n int) (campaign, bool) {
	t.Helper()
	c := campaign{nodes: n, duration: defaultDuration, clientsPerNode: defaultClients, bin: fencerdBin,
		seed:      envSeed(t, "CHAOS_SEED"),
		workloads: []workloadKind{wlLinearizable, wlExpiry, wlFenced, wlRedisLua, wlRedsync, wlSessions, wlElection, wlRWLock, wlSemaphore},
		kinds:     deck, first: killLeader, lazy: os.Getenv("CHAOS_LAZYFS") != "0"}
	if !c.lazy {
		c.kinds = slices.DeleteFunc(slices.Clone(deck), func(k faultKind) bool { return slices.Contains(powerCuts, k) })
	}
	if s := os.Getenv("CHAOS_NODES"); s != "" && !slices.Contains(atois(t, "CHAOS_NODES", strings.Fields(s)), n) {
		return c, false
	}
	if d, set := envDuration(t, "CHAOS_DURATION"); set {
		c.duration = d
	}
	if s := os.Getenv("CHAOS_CLIENTS"); s != "" {
		c.clientsPerNode = atois(t, "CHAOS_CLIENTS", []string{s})[0]
		if c.clientsPerNode < 1 {
			t.Fatalf("CHAOS_CLIENTS=%q: want at least 1", s)
		}
	}
	return c, true
}

// runDir makes a directory for a run's logs, data and histories, named
// after prefix. It is removed when the test ends, unless the test failed or
// CHAOS_KEEP=1: then the test logs where it is.
func runDir(t *testing.T, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("CHAOS_KEEP") == "1" {
			t.Logf("logs, data and histories kept in %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	return dir
}

// envDuration reads the environment variable name, a positive duration;
// set is false if it is empty.
func envDuration(t *testing.T, name string) (d time.Duration, set bool) {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive duration such as 3m", name, s)
	}
	return d, true
}

// envSeed reads the environment variable name, a seed that repeats a run's
// schedule, or draws a new seed if it is empty.
func envSeed(t *testing.T, name string) uint64 {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return uint64(time.Now().UnixNano())
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: want an unsigned integer", name, s)
	}
	return v
}

func atois(t *testing.T, name string, ss []string) []int {
	t.Helper()
	var out []int
	for _, s := range ss {
		v, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("%s: %q is not a number", name, s)
		}
		out = append(out, v)
	}
	return out
}

// minLeaderChanges is how many leader changes a run must show: at least ten
// in a full campaign (two minutes or more), one in the short one.
func minLeaderChanges(d time.Duration) int {
	if s := os.Getenv("CHAOS_MIN_LEADER_CHANGES"); s != "" {
		if v, err := strconv.Atoi(s); err == nil {
			return v
		}
	}
	if d >= 2*time.Minute {
		return 10
	}
	return 1
}

// workloads are the checked workloads of a run, which share one log of
// grants.
type workloads struct {
	grants *grantLog
	lin    *linWorkload
	exp    *expiryWorkload
	fenced *fencedWorkload
	sess   *sessionWorkload
	elect  *electionWorkload
	rw     *rwWorkload
	sem    *semWorkload
}

func newWorkloads() *workloads {
	grants := &grantLog{}
	return &workloads{grants: grants, lin: &linWorkload{grants: grants}, exp: &expiryWorkload{grants: grants},
		fenced: newFencedWorkload(grants), sess: newSessionWorkload(grants), elect: newElectionWorkload(grants),
		rw: newRWWorkload(), sem: newSemWorkload()}
}

// spawn starts perNode clients on every node of c, which run kinds in turn
// until the crowd stops.
func (w *workloads) spawn(clients *crowd, c *cluster, perNode int, kinds []workloadKind) {
	for i := range c.nodes {
		for j := range perNode {
			clients.spawn(i, func(cl *client) { w.run(kinds[(i+j)%len(kinds)], cl, c, clients.stop) })
		}
	}
}

// run runs the workload of the given kind on cl until stop.
func (w *workloads) run(kind workloadKind, cl *client, c *cluster, stop <-chan struct{}) {
	switch kind {
	case wlLinearizable:
		w.lin.run(cl, stop)
	case wlExpiry:
		w.exp.run(cl, stop)
	case wlFenced:
		w.fenced.run(cl, stop)
	case wlRedisLua:
		w.fenced.runRedisLua(cl, stop)
	case wlRedsync:
		w.fenced.runRedsync(cl, c, stop)
	case wlRedsyncEvery:
		w.fenced.runRedsyncEvery(cl, c, stop)
	case wlSessions:
		w.sess.run(cl, stop)
	case wlElection:
		w.elect.run(cl, c, stop)
	case wlRWLock:
		w.rw.run(cl, stop)
	case wlSemaphore:
		w.sem.run(cl, stop)
	}
}

// runCampaign starts a cluster, runs the workloads and the nemesis for the
// configured time, heals, waits for the nodes to converge and runs every
// checker. It fails the test only if the harness itself cannot do its job;
// what the checkers found is in the report.
func runCampaign(t *testing.T, cfg campaign) *report {
	t.Helper()
	t.Logf("fault campaign: %d nodes, %v, seed %d (CHAOS_SEED=%d draws the same faults and client choices again)", cfg.nodes, cfg.duration, cfg.seed, cfg.seed)
	dir := runDir(t, fmt.Sprintf("fencer-chaos-%dn-", cfg.nodes))
	c, err := startCluster(clusterConfig{nodes: cfg.nodes, bin: cfg.bin, env: cfg.env, dir: dir, lazy: cfg.lazy, seed: cfg.seed, args: cfg.args})
	if err != nil {
		t.Fatalf("starting the cluster: %v", err)
	}
	t.Cleanup(c.teardown)

	rep := &report{cfg: cfg, dir: dir, count: &counters{}}
	clk := clock{start: time.Now()}
	w := newWorkloads()
	clients := newCrowd(c, clk, cfg.seed, rep.count)
	w.spawn(clients, c, cfg.clientsPerNode, cfg.workloads)
	nm := &nemesis{c: c, clk: clk, rng: newRand(cfg.seed), fenced: w.fenced, kinds: cfg.kinds, first: cfg.first}
	nm.runFor(cfg.duration)
	// A little quiet time on a whole cluster, then stop the clients.
	time.Sleep(2 * time.Second)
	close(clients.stop)
	clients.wait(t)
	rep.elapsed = time.Duration(clk.now())

	rep.settle(t, c)

	all := w.grants.all()
	rep.tally(all, nm)
	if slices.Contains(cfg.workloads, wlLinearizable) {
		rep.results = append(rep.results, w.lin.check(dir))
	}
	rep.results = append(rep.results, checkEarlyExpiry(all))
	if slices.Contains(cfg.workloads, wlFenced) || slices.Contains(cfg.workloads, wlRedisLua) || slices.Contains(cfg.workloads, wlRedsync) ||
		slices.Contains(cfg.workloads, wlRedsyncEvery) {
		rep.results = append(rep.results, w.fenced.check())
	}
	if slices.Contains(cfg.workloads, wlSessions) {
		rep.results = append(rep.results, w.sess.check(), w.sess.checkFenced())
	}
	if slices.Contains(cfg.workloads, wlElection) {
		rep.results = append(rep.results, w.elect.check()...)
	}
	if slices.Contains(cfg.workloads, wlRWLock) {
		rep.results = append(rep.results, w.rw.check(nm.restarts)...)
	}
	if slices.Contains(cfg.workloads, wlSemaphore) {
		rep.results = append(rep.results, w.sem.check(nm.restarts)...)
	}
	rep.results = append(rep.results, checkTokens(all, nm.restarts))
	rep.results = append(rep.results, checkStateHashes(rep.hashes, rep.convergeErr))

	rep.readLogs(c)
	t.Log("\n" + rep.summary())
	return rep
}

// checkStateHashes: after healing, every node applied the same log, so every
// FENCE.STATEHASH is the same.
func checkStateHashes(hs []stateHash, convergeErr error) checkResult {
	res := checkResult{name: "same state on every node", checked: len(hs)}
	var unread *unreadableError
	switch {
	case errors.As(convergeErr, &unread):
		// Not a difference: there was nothing to compare (the run fails
		// all the same).
		res.checked = 0
		res.undecided = convergeErr.Error()
		return res
	case convergeErr != nil:
		// Every node answered, and they stayed at different applied
		// indexes.
		res.violations = append(res.violations, convergeErr.Error())
		return res
	}
	for i, h := range hs {
		if h != hs[0] {
			res.violations = append(res.violations, fmt.Sprintf("n%d has %s at index %d, n1 has %s at index %d", i+1, h.hash, h.index, hs[0].hash, hs[0].index))
		}
	}
	if len(hs) > 0 {
		res.notes = append(res.notes, fmt.Sprintf("applied index %d, sha256 %.12s…", hs[0].index, hs[0].hash))
	}
	return res
}

// assertClean fails the test for every violation, harness error, bad log
// line, too slow a recovery and too few leader changes.
func assertClean(t *testing.T, r *report, minChanges int) {
	t.Helper()
	for _, res := range r.results {
		if res.undecided != "" {
			t.Errorf("%s: %s", res.name, res.undecided)
		}
		for i, v := range res.violations {
			if i == 20 {
				t.Errorf("%s: … %d more", res.name, len(res.violations)-20)
				break
			}
			t.Errorf("%s: %s", res.name, v)
		}
	}
	for _, e := range r.nemesisErrs {
		t.Errorf("harness: %s", e)
	}
	for _, b := range r.badLogs {
		t.Errorf("log: %s", b)
	}
	for _, f := range r.faults {
		if f.kind == killLeader && f.recovery > maxRecovery {
			t.Errorf("%s (%s) at +%v: first write acknowledged after %v, want within %v", f.kind, f.detail, f.at, f.recovery, maxRecovery)
		}
	}
	if r.leaderChanges < minChanges {
		t.Errorf("%d leader changes, want at least %d", r.leaderChanges, minChanges)
	}
	if n := r.count.unexpected.Load(); n > 0 {
		t.Errorf("%d replies did not fit their command; the first: %v", n, r.count.sample.Load())
	}
	if r.count.okOps.Load() == 0 {
		t.Error("no operation succeeded")
	}
}

func waitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// TestChaos3Nodes runs the campaign on three nodes.
func TestChaos3Nodes(t *testing.T) { testChaos(t, 3) }

// TestChaos5Nodes runs the campaign on five nodes.
func TestChaos5Nodes(t *testing.T) { testChaos(t, 5) }

// TestChaosMembership runs the campaign on three nodes with membership
// changes only: the leader removing itself, removals and joins during
// partitions, and replacing a node whose disk was lost.
func TestChaosMembership(t *testing.T) {
	requireRoot(t)
	cfg, run := envCampaign(t, 3)
	if !run {
		t.Skipf("CHAOS_NODES=%q leaves out 3 nodes", os.Getenv("CHAOS_NODES"))
	}
	cfg.kinds = []faultKind{removeLeader, transferRemove, removeIsolated, joinDuringSplit, removeReadd}
	cfg.first = removeLeader
	r := runCampaign(t, cfg)
	assertClean(t, r, minLeaderChanges(cfg.duration))
	if got := len(r.faults); got < 2 {
		t.Errorf("%d membership faults dealt, want at least 2", got)
	}
}

// TestChaosPowerCuts runs the campaign on three nodes with power cuts
// only: one node, a majority, every node, each restarted on what its
// lazyfs kept, with 64 entries kept behind each snapshot.
func TestChaosPowerCuts(t *testing.T) {
	requireRoot(t)
	cfg, run := envCampaign(t, 3)
	if !run {
		t.Skipf("CHAOS_NODES=%q leaves out 3 nodes", os.Getenv("CHAOS_NODES"))
	}
	if !cfg.lazy {
		t.Fatal("CHAOS_LAZYFS=0: power cuts need the data on lazyfs")
	}
	cfg.kinds, cfg.first = powerCuts, powerCutAll
	// Few entries kept behind each snapshot, so that a node's log begins
	// just before its newest snapshot: a cut that lost a snapshot the log
	// relies on would show (the node refusing to start, or diverging).
	cfg.args = []string{"--raft-trailing-logs", "64"}
	r := runCampaign(t, cfg)
	assertClean(t, r, minLeaderChanges(cfg.duration))
	if got := len(r.faults); got < 3 {
		t.Errorf("%d power cuts dealt, want at least 3", got)
	}
}

// TestChaosRedlockMultiEndpoint runs the campaign on three nodes started
// with --redlock-multi-endpoint, with redsync given every node's address
// besides the Redis-compatible and native fenced workloads on one address.
func TestChaosRedlockMultiEndpoint(t *testing.T) {
	requireRoot(t)
	cfg, run := envCampaign(t, 3)
	if !run {
		t.Skipf("CHAOS_NODES=%q leaves out 3 nodes", os.Getenv("CHAOS_NODES"))
	}
	cfg.args = []string{"--redlock-multi-endpoint"}
	cfg.workloads = []workloadKind{wlRedsyncEvery, wlRedsyncEvery, wlRedsync, wlRedisLua, wlFenced, wlExpiry}
	r := runCampaign(t, cfg)
	assertClean(t, r, minLeaderChanges(cfg.duration))
	if r.grants["redsync-every"] == 0 {
		t.Error("redsync on every address was never granted a lock")
	}
	t.Logf("redsync on every address: %d grants, %d Unlock calls, %d failed (faults)", r.grants["redsync-every"],
		everyUnlocks.Load(), everyUnlockFails.Load())
}

func testChaos(t *testing.T, n int) {
	requireRoot(t)
	cfg, run := envCampaign(t, n)
	if !run {
		t.Skipf("CHAOS_NODES=%q leaves out %d nodes", os.Getenv("CHAOS_NODES"), n)
	}
	r := runCampaign(t, cfg)
	assertClean(t, r, minLeaderChanges(cfg.duration))
}
