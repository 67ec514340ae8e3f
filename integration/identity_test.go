package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencerlock/fencer/internal/testbin"
)

// A cluster knows who it is (docs/operations.md, "The cluster's ID"): real
// fencerd processes.

// clusterIDOf returns INFO's fencer_cluster_id on addr, "" if none yet.
func clusterIDOf(t *testing.T, addr string) string {
	t.Helper()
	v, err := clusterCall(addr, requestTimeout, "INFO", "server")
	if err != nil {
		t.Fatalf("INFO on %s: %v", addr, err)
	}
	s, _ := v.(string)
	for _, line := range strings.Split(s, "\r\n") {
		if id, ok := strings.CutPrefix(line, "fencer_cluster_id:"); ok {
			return id
		}
	}
	t.Fatalf("INFO on %s has no fencer_cluster_id: %q", addr, s)
	return ""
}

// awaitClusterID waits until every addr answers the same non-empty ID.
func awaitClusterID(t *testing.T, addrs ...string) string {
	t.Helper()
	deadline := time.Now().Add(clusterReadyTimeout)
	for {
		id := clusterIDOf(t, addrs[0])
		same := id != ""
		for _, a := range addrs[1:] {
			same = same && clusterIDOf(t, a) == id
		}
		if same {
			return id
		}
		if time.Now().After(deadline) {
			t.Fatalf("the nodes %v do not agree on a cluster ID within %v", addrs, clusterReadyTimeout)
		}
		time.Sleep(clusterPollEvery)
	}
}

// The first leader commits one ID that every member has (INFO, FENCE.CLUSTER
// with each member's version, the data directory); a node that bootstrapped
// a cluster of its own and is restarted with --join to this one is refused,
// naming both IDs; the whole cluster stopped and started again comes back
// as the same cluster; a cluster seeded by --restore gets an ID of its own.
func TestClusterIdentity(t *testing.T) {
	c := startNodeCluster(t, 3)
	var addrs []string
	for _, d := range c.nodes {
		addrs = append(addrs, d.addr)
	}
	id := awaitClusterID(t, addrs...)
	t.Logf("cluster ID %s", id)
	for _, d := range c.nodes {
		b, err := os.ReadFile(filepath.Join(d.dataDir, "cluster-id"))
		if err != nil || strings.TrimSpace(string(b)) != id {
			t.Fatalf("%s: cluster-id file %q (%v), want %s", d.dataDir, b, err, id)
		}
	}
	v, err := clusterCall(addrs[1], requestTimeout, "FENCE.CLUSTER")
	if err != nil {
		t.Fatal(err)
	}
	m, ok := v.([]any)
	if !ok || len(m) != 6 || m[0] != "id" || m[1] != id || m[2] != "leader" || m[4] != "members" {
		t.Fatalf("FENCE.CLUSTER: %#v", v)
	}
	members, _ := m[5].([]any)
	if len(members) != 3 {
		t.Fatalf("FENCE.CLUSTER members: %#v", m[5])
	}
	for _, row := range members {
		f, _ := row.([]any)
		if len(f) != 10 || f[8] != "version" || f[9] == "" {
			t.Fatalf("FENCE.CLUSTER member without its version: %#v", row)
		}
	}

	// A stray node: bootstrapped alone, then given this cluster's address.
	stray := newDaemons(t, 1)[0]
	stray.start(t)
	strayID := awaitClusterID(t, stray.addr)
	if strayID == id {
		t.Fatalf("two clusters with one ID %s", id)
	}
	if code, _ := stray.terminate(t); code != 0 {
		t.Fatalf("stray node exited %d", code)
	}
	stray.args = append(stray.args, "--join", strings.Join(addrs, ","))
	stray.ready = func(*daemon) error { return nil }
	stray.start(t)
	select {
	case <-stray.proc.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("a node of another cluster given this cluster's addresses started")
	}
	log := stray.log(t)
	if stray.proc.state.ExitCode() == 0 || !strings.Contains(log, strayID) || !strings.Contains(log, id) {
		t.Fatalf("stray node: exit %d, log %s; want a refusal naming %s and %s", stray.proc.state.ExitCode(), log, strayID, id)
	}
	t.Logf("the stray node refused to start: %s", lastLine(log))

	// The whole cluster stops and starts again, with its --join flags.
	for _, d := range c.nodes {
		d.terminate(t)
	}
	for _, d := range c.nodes {
		d.restart(t)
	}
	c.awaitMembers(t, c.all(), c.all(), clusterReadyTimeout)
	if again := awaitClusterID(t, addrs...); again != id {
		t.Fatalf("after a full restart the cluster ID is %s, was %s", again, id)
	}
	g := c.mustGrant(t, 0, clusterRetryWithin, "after-restart", "o", time.Minute)

	// A cluster seeded from this one's snapshot is a cluster of its own.
	snap, err := clusterCall(addrs[c.leader(t)], requestTimeout, "FENCE.SNAPSHOT")
	if err != nil {
		t.Fatal(err)
	}
	data, ok := snap.(string)
	if !ok {
		t.Fatalf("FENCE.SNAPSHOT: %#v", snap)
	}
	file := filepath.Join(t.TempDir(), "snap")
	if err := os.WriteFile(file, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	seeded := newDaemons(t, 1)[0]
	seeded.args = append(seeded.args, "--restore", file)
	seeded.start(t)
	seededID := awaitClusterID(t, seeded.addr)
	if seededID == id || seededID == strayID {
		t.Fatalf("the restored cluster's ID %s is not its own", seededID)
	}
	rc := &nodeCluster{nodes: []*daemon{seeded}, ids: make([]string, 1)}
	if s, held := rc.statusOf(t, 0, clusterRetryWithin, "after-restart"); !held || s.token != g.token {
		t.Fatalf("the restored cluster lost the lock: %+v %v", s, held)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// A data directory written by a release from before cluster IDs
// (testdata/upgrade-from, built from the repository) gets an ID the first
// time the current build leads it, once: a restart keeps it, and the locks
// and tokens from before are kept.
func TestClusterIDForAPreIDDataDirectory(t *testing.T) {
	baseline, err := testbin.BuildBaseline()
	if err != nil {
		t.Fatal(err)
	}
	d := newDaemons(t, 1)[0]
	d.bin = baseline
	d.start(t)
	c := &nodeCluster{nodes: []*daemon{d}, ids: make([]string, 1)}
	g := c.mustGrant(t, 0, clusterRetryWithin, "before-ids", "o", time.Hour)
	v, err := clusterCall(d.addr, requestTimeout, "INFO", "server")
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := v.(string); strings.Contains(s, "fencer_cluster_id") {
		t.Fatalf("the baseline already has cluster IDs: %q", s)
	}
	d.terminate(t)

	d.bin = ""
	d.restart(t)
	id := awaitClusterID(t, d.addr)
	if s, held := c.statusOf(t, 0, clusterRetryWithin, "before-ids"); !held || s.token != g.token {
		t.Fatalf("the lock from before: %+v held %v, want token %d", s, held, g.token)
	}
	d.terminate(t)
	d.restart(t)
	if again := awaitClusterID(t, d.addr); again != id {
		t.Fatalf("after a restart the ID is %s, was %s", again, id)
	}
	logs, _ := filepath.Glob(filepath.Join(d.dir, "fencerd-*.log"))
	named := 0
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			t.Fatal(err)
		}
		named += strings.Count(string(b), "naming the cluster")
	}
	if named != 1 {
		t.Fatalf("the cluster was named %d times in %d runs, want once", named, len(logs))
	}
}
