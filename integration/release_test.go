package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencerlock/fencer/internal/version"
)

// jsonLogLines parses a --log-format json log: every line must be one JSON
// object (raft's lines too: one format).
func jsonLogLines(t *testing.T, node int, log string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(log), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Errorf("node %d: a log line that is not JSON: %q", node, l)
			continue
		}
		lines = append(lines, m)
	}
	return lines
}

// A cluster that starts and grows by joins logs no WARN: raft's lines come
// through fencerd's logger, the healthy start's election and the joiners'
// first appends at INFO. A leader's death still makes the followers warn.
func TestHealthyClusterLogsNoWarning(t *testing.T) {
	c := startNodeClusterWith(t, 3, func(d *daemon) {
		d.args = append(d.args, "--log-format", "json", "--raft-log-level", "info")
	})
	demoted := map[string]bool{}
	for i, d := range c.nodes {
		for _, m := range jsonLogLines(t, i+1, d.log(t)) {
			if m["level"] == "WARN" || m["level"] == "ERROR" {
				t.Errorf("node %d logged %v during a healthy start and join: %v", i+1, m["level"], m)
			}
			if m["level"] == "INFO" && strings.HasPrefix(toString(m["module"]), "raft") {
				demoted[toString(m["msg"])] = true
			}
		}
	}
	for _, msg := range []string{"heartbeat timeout reached, starting election", "failed to get previous log"} {
		if !demoted[msg] {
			t.Errorf("no node logged %q at INFO; the healthy start did not go as this test expects", msg)
		}
	}

	l := c.leader(t)
	oldID := c.ids[l]
	c.nodes[l].kill9(t)
	survivors := c.others(l)
	c.awaitNewLeader(t, survivors, oldID, time.Now(), clusterElectionTimeout)
	warned := false
	for _, i := range survivors {
		for _, m := range jsonLogLines(t, i+1, c.nodes[i].log(t)) {
			warned = warned || m["level"] == "WARN" && m["msg"] == "heartbeat timeout reached, starting election" && m["last-leader-id"] == oldID
		}
	}
	if !warned {
		t.Errorf("no survivor logged a WARN naming the dead leader %s", oldID)
	}
}

func toString(v any) string { s, _ := v.(string); return s }

// fencer version prints its own version and every node's, as each node
// reports it.
func TestVersionOfEveryNode(t *testing.T) {
	c := startNodeCluster(t, 3)
	out, err := exec.Command(clFencerBin(t), "--addr", c.nodes[1].addr, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("fencer version: %v\n%s", err, out)
	}
	lines := clLines(string(out))
	if len(lines) != 5 || !strings.HasPrefix(lines[0], "fencer "+version.Version+" (commit ") || !strings.HasPrefix(lines[1], "ID ") {
		t.Fatalf("fencer version printed:\n%s", out)
	}
	for i, d := range c.nodes {
		found := false
		for _, l := range lines[2:] {
			f := strings.Fields(l)
			found = found || len(f) >= 4 && f[0] == c.ids[i] && f[1] == d.addr && f[3] == version.Version
		}
		if !found {
			t.Errorf("node %d (%s at %s) has no row with version %s:\n%s", i+1, c.ids[i], d.addr, version.Version, out)
		}
	}
}

// The real binary takes its settings from the environment and a file
// below its flags: here the address from FENCER_LISTEN, the password from
// the file FENCER_REQUIREPASS_FILE names, the Raft address and --max-ttl
// from the file, and --max-ttl from the flag, which wins.
func TestSettingsFromEnvironmentAndFile(t *testing.T) {
	dir := t.TempDir()
	ports := freePorts(t, 2)
	d := newDaemon(dir, ports[0], ports[1])
	pass := filepath.Join(dir, "pass")
	conf := filepath.Join(dir, "fencerd.yaml")
	if err := os.WriteFile(pass, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, []byte("raft-listen: 127.0.0.1:"+ports[1]+"\nmax-ttl: 1s\nhttp-listen: \"off\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d.args = []string{"--data-dir", d.dataDir, "--config", conf, "--max-ttl", "40s", "--http-listen", "off"}
	d.env = []string{"FENCER_LISTEN=" + d.addr, "FENCER_REQUIREPASS_FILE=" + pass}
	d.start(t)

	if got := secCLI(t, d.port, "FENCE.ACQUIRE", "a", "me", "10000"); got != "NOAUTH Authentication required." {
		t.Errorf("without AUTH: got %q, want NOAUTH", got)
	}
	if got := secCLI(t, d.port, "-a", "s3cret", "--no-auth-warning", "FENCE.ACQUIRE", "a", "me", "35000"); !secGranted(got) {
		t.Errorf("a 35 s lease under the flag's --max-ttl 40s (the file says 1s): got %q", got)
	}
	if got := secCLI(t, d.port, "-a", "s3cret", "--no-auth-warning", "FENCE.ACQUIRE", "b", "me", "50000"); !strings.Contains(got, "outside 100ms..40s") {
		t.Errorf("a 50 s lease above --max-ttl 40s: got %q, want a refusal", got)
	}
}
