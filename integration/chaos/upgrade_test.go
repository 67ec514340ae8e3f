//go:build linux

package chaos

import (
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fencerlock/fencer/internal/testbin"
)

// The rolling upgrade (docs/compatibility.md, docs/operations.md): a
// cluster of the build testdata/upgrade-rolling-from names is upgraded node
// by node to this build under the campaign's workloads, and a mixed cluster
// never writes what one of its members cannot read.
const (
	// defaultUpgradeDwell is how long the workloads run between two steps
	// of the upgrade in go test; CHAOS_UPGRADE_DWELL sets it (make
	// upgrade-full).
	defaultUpgradeDwell = time.Second
	// upgradeSnapshotThreshold, upgradeTrailingLogs and the smallest
	// segment size make the leader drop its log behind a stopped follower
	// within seconds (the log is compacted a whole segment at a time), so
	// that the follower catches up through InstallSnapshot: the test makes
	// a leader of one build send a snapshot to a follower of the other.
	upgradeSnapshotThreshold = 128
	upgradeTrailingLogs      = 64
	upgradeSegmentSize       = 64 << 10
	// formatRaisedWithin bounds the time from the last old node joining
	// as the new build to every node reporting format level 1: the leader
	// raises it once it sees every member read it, well within this on a
	// loaded machine.
	formatRaisedWithin = 30 * time.Second
	// snapshotWithin bounds the wait for a leader's snapshot past a
	// stopped follower, under the workloads' load.
	snapshotWithin = 60 * time.Second
)

// upgradeWorkloads are the workloads the cluster runs through the upgrade:
// native locks (linearizability and fenced writes), Redis-compatible locks
// through the Lua scripts, locks under sessions, and read-write locks.
var upgradeWorkloads = []workloadKind{wlLinearizable, wlFenced, wlRedisLua, wlSessions, wlRWLock}

// TestRollingUpgrade upgrades a 3-node cluster of the baseline build to this
// one, a node at a time, under load: the followers first while the old
// leader leads (the first of them catching up through a snapshot from the
// old leader), then the old leader steps down onto a new node, its old
// follower catches up through a snapshot from the new leader, and the last
// old node is upgraded. The new format (level 1) must not be used while an
// old node is a member, and must be used once none is. Before the upgrade
// the baseline's `fencer snapshot save` file is restored into this build;
// after it, a rollback of one node to the baseline is refused.
func TestRollingUpgrade(t *testing.T) {
	requireRoot(t)
	began := time.Now()
	base, err := testbin.BuildBaselineOf(testbin.RollingBaselineFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("baseline %.12s built (or found in the cache) in %v", base.Commit, time.Since(began).Round(10*time.Millisecond))
	dwell := defaultUpgradeDwell
	if d, set := envDuration(t, "CHAOS_UPGRADE_DWELL"); set {
		dwell = d
	}
	perKind := 2
	if s := os.Getenv("CHAOS_CLIENTS"); s != "" {
		perKind = atois(t, "CHAOS_CLIENTS", []string{s})[0]
	}

	dir := runDir(t, "fencer-upgrade-")
	c, err := startCluster(clusterConfig{nodes: 3, bin: base.Fencerd, dir: dir, args: []string{
		"--snapshot-threshold", strconv.Itoa(upgradeSnapshotThreshold),
		"--raft-trailing-logs", strconv.Itoa(upgradeTrailingLogs),
		"--raft-segment-size", strconv.Itoa(upgradeSegmentSize)}})
	if err != nil {
		t.Fatalf("starting a cluster of the baseline: %v", err)
	}
	t.Cleanup(c.teardown)
	t.Cleanup(func() {
		// A step that failed may have failed because a node died: say so.
		if t.Failed() {
			for _, n := range c.nodes {
				for _, b := range append(n.badLogLines(), n.unexpectedExits()...) {
					t.Logf("%s: %s", n.id, b)
				}
			}
		}
	})
	u := &upgrade{t: t, c: c, base: base, clk: clock{start: time.Now()}}
	u.formats = newFormatWatch(c, len(c.nodes))
	u.formats.start()
	defer u.formats.stop()
	u.record("cluster of the baseline formed: %s", u.versions())

	rep := &report{cfg: campaign{nodes: 3, workloads: upgradeWorkloads, clientsPerNode: perKind * len(upgradeWorkloads) / 3}, dir: dir, count: &counters{}}
	w := newWorkloads()
	clients := newCrowd(c, u.clk, uint64(time.Now().UnixNano()), rep.count)
	for k := range perKind * len(upgradeWorkloads) {
		clients.spawn(k%len(c.nodes), func(cl *client) { w.run(upgradeWorkloads[k%len(upgradeWorkloads)], cl, c, clients.stop) })
	}
	time.Sleep(dwell)

	// The baseline's backup, restored into this build.
	u.backupRestore(dir, w.grants)
	time.Sleep(dwell)

	// The leader among the old nodes: upgrade its followers.
	leader := u.leader()
	followers := others(len(c.nodes), leader)
	u.restartAs(followers[0], fencerdBin, true)
	u.record("%s upgraded while %s (old) leads; it caught up through the old leader's snapshot", c.nodes[followers[0]].id, c.nodes[leader].id)
	time.Sleep(dwell)
	u.restartAs(followers[1], fencerdBin, false)
	u.record("%s upgraded while %s (old) leads", c.nodes[followers[1]].id, c.nodes[leader].id)
	time.Sleep(dwell)

	// The old leader steps down onto a new node; its old follower then
	// catches up through the new leader's snapshot.
	u.transfer(leader, followers[0])
	time.Sleep(dwell)
	u.restartAs(leader, base.Fencerd, true)
	u.record("%s (old) restarted as the baseline; it caught up through the new leader's snapshot", c.nodes[leader].id)
	time.Sleep(dwell)

	// The last old node, a follower of a new leader.
	u.restartAs(leader, fencerdBin, false)
	joined := time.Now()
	u.record("%s upgraded, the last old node: %s", c.nodes[leader].id, u.versions())
	u.awaitFormat(joined)
	time.Sleep(dwell)

	u.rollback(u.follower())
	time.Sleep(dwell)
	u.rejoinRefused(u.follower())
	time.Sleep(dwell)

	close(clients.stop)
	clients.wait(t)
	u.formats.stop()
	rep.elapsed = time.Duration(u.clk.now())
	rep.settle(t, c)
	all := w.grants.all()
	rep.tally(all, &nemesis{})
	rep.results = append(rep.results, w.lin.check(dir), checkEarlyExpiry(all), w.fenced.check(),
		w.sess.check(), w.sess.checkFenced())
	rep.results = append(rep.results, w.rw.check(nil)...)
	rep.results = append(rep.results, checkTokens(all, nil), checkStateHashes(rep.hashes, rep.convergeErr))
	rep.readLogs(c)
	t.Log("\nrolling upgrade, steps:\n" + strings.Join(u.steps, "\n"))
	// The campaign's summary without its fault tables: no fault was dealt.
	var figures []string
	for _, block := range strings.Split(rep.summary(), "\n\n") {
		if strings.HasPrefix(block, "fault campaign:") {
			_, block, _ = strings.Cut(block, "\n")
			figures = append(figures, block)
		} else if strings.HasPrefix(block, "checker") {
			figures = append(figures, block)
		}
	}
	t.Logf("\nrolling upgrade from %.12s: 3 nodes, %d clients, %v of workload\n%s", base.Commit, perKind*len(upgradeWorkloads), rep.elapsed.Round(time.Second), strings.Join(figures, "\n\n"))
	t.Logf("format level: %d INFO samples of this build's nodes, %d of them at level 0 while an old node was a member; level 1 first reported %v after the last node joined, by every node after %v",
		u.formats.samples(), u.formats.zeroWithOld(), u.firstOne, u.allOne)
	for _, e := range u.formats.errors() {
		t.Error(e)
	}
	if n := u.formats.zeroWithOld(); n == 0 {
		t.Error("no node of this build was seen at format level 0 while an old node was a member")
	}
	assertClean(t, rep, 1)
}

// upgrade is the state of one rolling upgrade.
type upgrade struct {
	t       *testing.T
	c       *cluster
	base    testbin.Baseline
	clk     clock
	formats *formatWatch
	steps   []string
	// firstOne and allOne: how long after the last old node joined as the
	// new build one node, then every node, reported level 1.
	firstOne, allOne time.Duration
}

// record adds a step to the run's log.
func (u *upgrade) record(format string, args ...any) {
	u.steps = append(u.steps, fmt.Sprintf("  +%-7v %s", time.Duration(u.clk.now()).Round(100*time.Millisecond), fmt.Sprintf(format, args...)))
}

// versions names the build each node runs, as its INFO says.
func (u *upgrade) versions() string {
	var out []string
	for i, n := range u.c.nodes {
		f, err := u.c.info(i)
		if err != nil {
			out = append(out, n.id+" ?")
			continue
		}
		build := "this build"
		if n.bin == u.base.Fencerd {
			build = fmt.Sprintf("%.7s", f["fencer_commit"])
		}
		out = append(out, fmt.Sprintf("%s %s (%s, format level %s)", n.id, f["fencer_version"], build, cmp.Or(f["fencer_format_in_use"], "-")))
	}
	return strings.Join(out, ", ")
}

// leader waits for a leader and returns it.
func (u *upgrade) leader() int {
	u.t.Helper()
	l, err := u.c.awaitLeader(formTimeout)
	if err != nil {
		u.t.Fatal(err)
	}
	return l
}

// follower returns a node that does not lead.
func (u *upgrade) follower() int { return others(len(u.c.nodes), u.leader())[0] }

// restartAs stops node i and starts bin on its data directory. With
// snapshot, it first waits until the leader has a snapshot whose log the
// leader no longer keeps from where i stopped, and then requires i to
// install the leader's snapshot.
func (u *upgrade) restartAs(i int, bin string, snapshot bool) {
	t, c, n := u.t, u.c, u.c.nodes[i]
	t.Helper()
	leader := u.leader()
	if snapshot && leader == i {
		t.Fatalf("%s leads: it cannot be sent a snapshot", n.id)
	}
	at, err := c.stateHash(i)
	if err != nil {
		t.Fatalf("%s: %v", n.id, err)
	}
	n.stop()
	if snapshot {
		deadline := time.Now().Add(snapshotWithin)
		for {
			first, err := c.nodes[leader].firstLogIndex()
			if err != nil {
				t.Fatal(err)
			}
			if first > at.index+1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s still keeps its log from index %d, %v after %s stopped at %d", c.nodes[leader].id, first, snapshotWithin, n.id, at.index)
			}
			time.Sleep(pollEvery)
		}
	}
	if bin == fencerdBin {
		u.formats.upgraded(i)
	}
	n.mu.Lock()
	n.bin = bin
	n.mu.Unlock()
	if err := n.start(); err != nil {
		t.Fatal(err)
	}
	if err := c.awaitMembers(formTimeout); err != nil {
		t.Fatalf("after restarting %s: %v", n.id, err)
	}
	if !snapshot {
		return
	}
	deadline := time.Now().Add(formTimeout)
	for !strings.Contains(readFile(n.lastLogPath()), "Installed remote snapshot") {
		if time.Now().After(deadline) {
			t.Fatalf("%s (stopped at index %d) did not install a snapshot from %s within %v", n.id, at.index, c.nodes[leader].id, formTimeout)
		}
		time.Sleep(pollEvery)
	}
}

// transfer hands leadership from node from to node to.
func (u *upgrade) transfer(from, to int) {
	t, c := u.t, u.c
	t.Helper()
	if v, err := c.call(from, adminTimeout, "FENCE.TRANSFER", c.nodes[to].id); err != nil || v != "OK" {
		t.Fatalf("FENCE.TRANSFER %s on %s: %v %v", c.nodes[to].id, c.nodes[from].id, v, err)
	}
	if l := u.leader(); l != to {
		t.Fatalf("after the transfer %s leads, want %s", c.nodes[l].id, c.nodes[to].id)
	}
	u.record("%s (old) stepped down onto %s (new)", c.nodes[from].id, c.nodes[to].id)
}

// backupRestore saves a snapshot with the baseline's fencer, while a lock
// is held, and restores it into a one-node cluster of this build: the lock
// is held there with its token, and a new grant's token is above every
// token acknowledged before the save.
func (u *upgrade) backupRestore(dir string, grants *grantLog) {
	t, c := u.t, u.c
	t.Helper()
	v, err := c.call(u.leader(), adminTimeout, "FENCE.ACQUIRE", "upgrade-backup", "backup-owner", ms(time.Hour))
	held, granted, gerr := asGrant(v)
	if err != nil || gerr != nil || !granted {
		t.Fatalf("FENCE.ACQUIRE upgrade-backup: %v %v %v", v, err, gerr)
	}
	saveAt := u.clk.now()
	file := filepath.Join(dir, "baseline.snap")
	save := exec.Command("ip", "netns", "exec", c.nw.hub, u.base.Fencer, "--addr", c.nodes[0].addr(), "snapshot", "save", file)
	if out, err := save.CombinedOutput(); err != nil {
		t.Fatalf("the baseline's fencer snapshot save: %v: %s", err, out)
	}
	var top uint64
	for _, g := range grants.all() {
		if g.ret < saveAt {
			top = max(top, g.token)
		}
	}
	top = max(top, held)

	r := &node{id: "restored", ns: c.nw.hub, ip: hubIP, dir: filepath.Join(dir, "restored"), bin: fencerdBin, nw: c.nw}
	r.dataDir = filepath.Join(r.dir, "data")
	if err := os.MkdirAll(r.dataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	r.args = []string{"--id", r.id, "--data-dir", r.dataDir, "--listen", r.addr(), "--protected-mode=false",
		"--raft-listen", hubIP + ":" + raftPort, "--restore", file}
	if err := r.start(); err != nil {
		t.Fatalf("this build restoring the baseline's snapshot: %v", err)
	}
	defer r.stop()
	rc := &cluster{nw: c.nw, nodes: []*node{r}}
	v, err = rc.call(0, adminTimeout, "FENCE.STATUS", "upgrade-backup")
	owner, token, isHeld, serr := asStatus(v)
	if err != nil || serr != nil || !isHeld || owner != "backup-owner" || token != held {
		t.Fatalf("restored FENCE.STATUS upgrade-backup: %v (%v %v), want held by backup-owner with token %d", v, err, serr, held)
	}
	v, err = rc.call(0, adminTimeout, "FENCE.ACQUIRE", "upgrade-after-restore", "o", ms(time.Minute))
	next, granted, gerr := asGrant(v)
	if err != nil || gerr != nil || !granted || next <= top {
		t.Fatalf("restored FENCE.ACQUIRE: %v (%v %v), want a token above %d", v, err, gerr, top)
	}
	if bad := r.badLogLines(); len(bad) > 0 {
		t.Fatalf("the restored node's log: %v", bad)
	}
	u.record("the baseline's snapshot save file restored into this build: upgrade-backup held with token %d, next grant %d > %d", held, next, top)
}

// awaitFormat waits until every node reports format level 1, and records
// how long after joined that took.
func (u *upgrade) awaitFormat(joined time.Time) {
	t := u.t
	t.Helper()
	deadline := joined.Add(formatRaisedWithin)
	for {
		levels := make([]string, len(u.c.nodes))
		ones := 0
		for i := range u.c.nodes {
			if f, err := u.c.info(i); err == nil {
				levels[i] = f["fencer_format_in_use"]
			}
			if levels[i] == "1" {
				ones++
			}
		}
		if ones > 0 && u.firstOne == 0 {
			u.firstOne = time.Since(joined).Round(10 * time.Millisecond)
		}
		if ones == len(u.c.nodes) {
			u.allOne = time.Since(joined).Round(10 * time.Millisecond)
			u.record("every node reports fencer_format_in_use:1, %v after the last node joined", u.allOne)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("fencer_format_in_use by node %q within %v of the last old node's upgrade, want 1 on every node", levels, formatRaisedWithin)
		}
		time.Sleep(pollEvery)
	}
}

// rollback stops node i, which runs this build with format level 1 in use,
// and starts the baseline on its data directory after i has snapshots taken
// at level 1: the baseline must refuse to run, naming the version it cannot
// read. Then i runs this build again.
func (u *upgrade) rollback(i int) {
	t, c, n := u.t, u.c, u.c.nodes[i]
	t.Helper()
	// Raft keeps two snapshots and falls back to the older one: both must
	// be of level 1.
	from := n.lastSnapshotIndex()
	deadline := time.Now().Add(snapshotWithin)
	for n.snapshotsAfter(from) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%s took no two snapshots past index %d within %v", n.id, from, snapshotWithin)
		}
		time.Sleep(pollEvery)
	}
	n.stop()
	n.mu.Lock()
	n.bin = u.base.Fencerd
	n.mu.Unlock()
	n.mu.Lock()
	exits := len(n.exits)
	n.mu.Unlock()
	err := n.start()
	n.mu.Lock()
	p, logPath := n.proc, n.logs[len(n.logs)-1]
	n.mu.Unlock()
	if err == nil {
		n.stop()
		t.Fatalf("the baseline ran on %s's data directory with format level 1 in use", n.id)
	}
	<-p.exited
	// The refusal is this step's outcome, not a failure of the run: its
	// exit and log are judged here.
	n.mu.Lock()
	n.exits = n.exits[:exits]
	n.logs = n.logs[:len(n.logs)-1]
	n.mu.Unlock()
	out := readFile(logPath)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	last := lines[len(lines)-1]
	// The baseline predates the gate: what it says is its snapshot
	// decoder's refusal of a version it does not know, then that it could
	// load no snapshot (docs/compatibility.md: a rollback after the new
	// format is in use is refused).
	refusal := ""
	for _, l := range lines {
		if strings.Contains(l, "unknown version 8") {
			refusal = l
			break
		}
	}
	if strings.Contains(out, "panic:") || refusal == "" || p.cmd.ProcessState.ExitCode() == 0 {
		t.Errorf("the baseline on a data directory at format level 1 did not refuse, naming snapshot version 8 (%v); its log ends: %s", p.cmd.ProcessState, last)
	}
	_, why, _ := strings.Cut(refusal, "error=")
	u.record("rollback of %s to the baseline refused (%v): %s; %s", n.id, p.cmd.ProcessState, why, last)
	n.mu.Lock()
	n.bin = fencerdBin
	n.mu.Unlock()
	if err := n.start(); err != nil {
		t.Fatal(err)
	}
	if err := c.awaitMembers(formTimeout); err != nil {
		t.Fatalf("after %s ran this build again: %v", n.id, err)
	}
	u.record("%s runs this build again", n.id)
}

// rejoinRefused removes node i, a follower, and asks to join it again as
// the baseline with an empty data directory, with format level 1 in use:
// the leader must refuse it, and the baseline must say why. Then i joins
// again as this build.
func (u *upgrade) rejoinRefused(i int) {
	t, c, n := u.t, u.c, u.c.nodes[i]
	t.Helper()
	nm := &nemesis{c: c, clk: u.clk, rng: newRand(uint64(i))}
	nm.remove(i, -1)
	n.stop()
	var join []string
	for _, j := range others(len(c.nodes), i) {
		join = append(join, c.nodes[j].addr())
	}
	n.setJoin(join)
	if err := n.wipe(); err != nil {
		t.Fatal(err)
	}
	n.mu.Lock()
	n.bin = u.base.Fencerd
	exits := len(n.exits)
	n.mu.Unlock()
	// The baseline may exit once refused, or keep asking: either way it
	// must not become a member, and its log must carry the refusal.
	_ = n.start()
	refused := ""
	deadline := time.Now().Add(formTimeout)
	for refused == "" {
		for _, l := range strings.Split(readFile(n.lastLogPath()), "\n") {
			if strings.Contains(l, "format level") {
				_, refused, _ = strings.Cut(l, "err=")
				refused = cmp.Or(refused, l)
				break
			}
		}
		if l := u.leader(); l != i {
			if ms, err := c.members(l); err == nil {
				if _, member := ms[n.id]; member {
					t.Fatalf("the baseline %s joined a cluster at format level 1: %v", n.id, ms)
				}
			}
		}
		if refused == "" && time.Now().After(deadline) {
			t.Fatalf("the baseline %s asked to join a cluster at format level 1 and its log names no refusal within %v; it ends: %s", n.id, formTimeout, n.lastLog())
		}
		time.Sleep(pollEvery)
	}
	n.stop()
	n.mu.Lock()
	n.exits = n.exits[:exits]
	n.mu.Unlock()
	u.record("%s removed, wiped and started as the baseline: its join refused: %s", n.id, refused)
	n.mu.Lock()
	n.bin = fencerdBin
	n.mu.Unlock()
	if err := n.wipe(); err != nil {
		t.Fatal(err)
	}
	if err := n.start(); err != nil {
		t.Fatal(err)
	}
	if err := c.awaitMembers(formTimeout); err != nil {
		t.Fatalf("after %s joined again as this build: %v", n.id, err)
	}
	for _, e := range nm.errs {
		t.Error(e)
	}
	u.record("%s joined again as this build", n.id)
}
