package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fencer members reports a stopped member as unhealthy within the
// cluster's unreachable limit (2 s here) plus the probe's second, and exits
// 2; with every member up it exits 0, and JSON carries the same view.
func TestOperatorMembersHealth(t *testing.T) {
	c := startNodeClusterWith(t, 3, func(d *daemon) { d.args = append(d.args, "--member-unreachable-after", "2s") })
	bin := clFencerBin(t)
	leader := c.leader(t)
	via := c.nodes[leader]
	// Every member answers within a few probes of the leader.
	var out, errOut string
	var code int
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, errOut, code = clFencer(t, bin, via, nil, "members")
		if code == 0 && strings.Count(out, "healthy") == 3 && !strings.Contains(out, "not asked yet") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("members never all healthy: exit %d\n%s%s", code, out, errOut)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("all up:\n%s", out)

	stopped := c.others(leader)[0]
	c.nodes[stopped].proc.stop(t)
	stoppedAt := time.Now()
	for {
		out, errOut, code = clFencer(t, bin, via, nil, "members")
		if code == 2 {
			break
		}
		if time.Since(stoppedAt) > 2*time.Second+2*time.Second+time.Second {
			t.Fatalf("%s stopped %v ago, members still exits %d:\n%s%s", c.ids[stopped], time.Since(stoppedAt), code, out, errOut)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("%s unhealthy %v after it stopped (exit %d):\n%s%s", c.ids[stopped], time.Since(stoppedAt).Round(10*time.Millisecond), code, out, errOut)
	row := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(c.ids[stopped]) + `\s+follower\s+UNHEALTHY\s.*no answer for`)
	if !row.MatchString(out) {
		t.Fatalf("no UNHEALTHY row for %s:\n%s", c.ids[stopped], out)
	}
	if !strings.Contains(errOut, "member "+c.ids[stopped]+" is unhealthy") {
		t.Fatalf("stderr does not name %s: %q", c.ids[stopped], errOut)
	}
	if n := strings.Count(out, " healthy "); n != 2 {
		t.Fatalf("%d healthy rows, want 2:\n%s", n, out)
	}

	out, _, code = clFencer(t, bin, via, nil, "members", "--output", "json")
	var h struct {
		Leader   string `json:"leader"`
		LagLimit uint64 `json:"lag_limit"`
		Members  []struct {
			ID           string `json:"id"`
			Healthy      bool   `json:"healthy"`
			Reachable    bool   `json:"reachable"`
			LastAnswerMS int64  `json:"last_answer_ms"`
			Applied      uint64 `json:"applied_index"`
			Readable     uint64 `json:"format_readable"`
		} `json:"members"`
	}
	if err := json.Unmarshal([]byte(out), &h); err != nil || code != 2 {
		t.Fatalf("members --output json: exit %d, %v:\n%s", code, err, out)
	}
	if h.Leader != c.ids[leader] || len(h.Members) != 3 || h.LagLimit != 10240 {
		t.Fatalf("json view: %+v", h)
	}
	for _, m := range h.Members {
		down := m.ID == c.ids[stopped]
		if m.Healthy == down || m.Reachable == down || (down && m.LastAnswerMS < 2000) || (!down && m.Applied == 0) || (!down && m.Readable != 1) {
			t.Fatalf("member %s (stopped %v): %+v", m.ID, down, m)
		}
	}

	// A cluster that cannot be reached is exit 1, not 2.
	for _, i := range c.all() {
		c.nodes[i].proc.stop(t)
	}
	_, errOut, code = clFencer(t, bin, via, nil, "members", "--timeout", "1s")
	if code != 1 {
		t.Fatalf("members with every node stopped: exit %d, want 1 (%s)", code, errOut)
	}
}

// fencer leader, transfer and revoke do what they say, revoke refuses to
// run unconfirmed without a terminal, and the node the command reached logs
// each administrative action with the user and the client's address.
func TestOperatorLeaderTransferRevokeAudit(t *testing.T) {
	c := startNodeCluster(t, 3)
	bin := clFencerBin(t)
	leader := c.leader(t)
	follower := c.others(leader)[0]
	via := c.nodes[follower] // forwarded to the leader: logged where it arrived

	out, _, code := clFencer(t, bin, via, nil, "leader")
	if code != 0 || out != fmt.Sprintf("%s %s\n", c.ids[leader], c.nodes[leader].addr) {
		t.Fatalf("leader: exit %d, %q", code, out)
	}

	g := c.mustGrant(t, leader, clusterRetryWithin, "job:1", "holder-a", time.Minute)
	_, errOut, code := clFencer(t, bin, via, nil, "revoke", "job:1")
	if code != 2 || !strings.Contains(errOut, "--yes") {
		t.Fatalf("revoke without a terminal or --yes: exit %d, stderr %q", code, errOut)
	}
	if _, held := c.statusOf(t, leader, clusterRetryWithin, "job:1"); !held {
		t.Fatal("the refused revoke freed the lock")
	}
	out, errOut, code = clFencer(t, bin, via, nil, "revoke", "--yes", "job:1")
	want := fmt.Sprintf("revoked \"job:1\" (held by holder-a with token %d when asked)\n", g.token)
	if code != 0 || out != want {
		t.Fatalf("revoke --yes: exit %d, %q (want %q), stderr %q", code, out, want, errOut)
	}
	if _, held := c.statusOf(t, leader, clusterRetryWithin, "job:1"); held {
		t.Fatal("job:1 still held after revoke")
	}

	out, errOut, code = clFencer(t, bin, via, nil, "transfer", c.ids[follower])
	if code != 0 || out != fmt.Sprintf("leadership moved from %s to %s (%s)\n", c.ids[leader], c.ids[follower], via.addr) {
		t.Fatalf("transfer: exit %d, %q, stderr %q", code, out, errOut)
	}

	logText := via.log(t)
	for _, action := range []string{"revoke", "transfer"} {
		re := regexp.MustCompile(`msg=audit action=` + action + ` args=\S+ user=default remote=127\.0\.0\.1:\d+`)
		if !re.MatchString(logText) {
			t.Fatalf("no audit line for %s in %s's log:\n%s", action, c.ids[follower], grepLines(logText, "audit"))
		}
	}
	t.Logf("audit lines:\n%s", grepLines(logText, "audit"))
	if l := c.nodes[leader].log(t); strings.Contains(l, "action=revoke") || strings.Contains(l, "action=transfer") {
		t.Fatalf("the leader logged the forwarded commands again:\n%s", grepLines(l, "audit"))
	}
}

// fencer locks shows a lock's holder and its waiters in order, and a user
// limited to a pattern lists only its names, in fencer locks and in KEYS,
// through a follower as well as the leader.
func TestOperatorListingsShowOnlyTheUsersNames(t *testing.T) {
	dir := t.TempDir()
	usersFile := filepath.Join(dir, "users")
	users := "billing billing-pass billing:*\nops ops-pass *\nnode node-pass *\n"
	if err := os.WriteFile(usersFile, []byte(users), 0o600); err != nil {
		t.Fatal(err)
	}
	ds := newDaemons(t, 3)
	for i, d := range ds {
		d.args = append(d.args, "--users", usersFile, "--forward-user", "node", "--http-listen", "off")
		if i > 0 {
			d.args = append(d.args, "--join", ds[0].addr)
		}
		d.ready = func(d *daemon) error { return pingOnce(d.addr) }
		d.start(t)
	}
	bin := clFencerBin(t)
	admin := []string{"FENCER_USER=ops", "FENCER_PASSWORD=ops-pass"}
	billing := []string{"FENCER_USER=billing", "FENCER_PASSWORD=billing-pass"}
	var out, errOut string
	var code int
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		out, errOut, code = clFencer(t, bin, ds[0], admin, "members")
		if code == 0 && strings.Count(out, " healthy ") == 3 && !strings.Contains(out, "not asked yet") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cluster never formed: exit %d\n%s%s", code, out, errOut)
		}
	}
	out, _, _ = clFencer(t, bin, ds[0], admin, "leader")
	var follower *daemon
	for _, d := range ds {
		if !strings.HasSuffix(strings.TrimSpace(out), " "+d.addr) {
			follower = d
		}
	}
	as := func(user, pass string, args ...string) string {
		t.Helper()
		return secCLI(t, follower.port, append([]string{"--user", user, "--pass", pass, "--no-auth-warning"}, args...)...)
	}
	if got := as("billing", "billing-pass", "FENCE.ACQUIRE", "billing:job", "holder", "60000"); !secGranted(got) {
		t.Fatalf("billing's grant: %q", got)
	}
	for _, args := range [][]string{{"SET", "other:x", "v", "PX", "60000"}, {"FENCE.ACQUIRE", "reports:1", "r", "60000"}} {
		as("ops", "ops-pass", args...)
	}
	// Two waiters, the second a moment after the first.
	for _, w := range []string{"w1", "w2"} {
		cmd := exec.Command("redis-cli", "-h", "127.0.0.1", "-p", follower.port, "--user", "billing", "--pass", "billing-pass",
			"--no-auth-warning", "FENCE.ACQUIRE", "billing:job", w, "60000", "WAIT", "30000")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		time.Sleep(300 * time.Millisecond)
	}
	// The holder's client: billing, from redis-cli's address as the
	// follower saw it, unnamed.
	row := regexp.MustCompile(`(?m)^billing:job\s+lock\s+holder\s+\d+\s+\d+(\.\d+)?m?s\s+-\s+billing 127\.0\.0\.1:\d+ -\s+1\. w1 \(.+\), 2\. w2 \(.+\)$`)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		out, errOut, code = clFencer(t, bin, follower, admin, "locks")
		if code == 0 && row.MatchString(out) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fencer locks never showed the holder and two waiters in order: exit %d\n%s%s", code, out, errOut)
		}
	}
	t.Logf("fencer locks (admin, via a follower):\n%s", out)
	for _, name := range []string{"other:x", "reports:1"} {
		if !strings.Contains(out, name) {
			t.Fatalf("the admin's listing lacks %s:\n%s", name, out)
		}
	}

	out, errOut, code = clFencer(t, bin, follower, billing, "locks")
	t.Logf("fencer locks (billing, via a follower):\n%s", out)
	if code != 0 || !row.MatchString(out) || strings.Contains(out, "other:") || strings.Contains(out, "reports:") {
		t.Fatalf("billing's listing: exit %d\n%s%s", code, out, errOut)
	}
	out, _, _ = clFencer(t, bin, follower, billing, "locks", "-o", "json")
	var l struct {
		Locks []struct {
			Name string `json:"name"`
		} `json:"locks"`
	}
	if err := json.Unmarshal([]byte(out), &l); err != nil || len(l.Locks) != 1 || l.Locks[0].Name != "billing:job" {
		t.Fatalf("billing's JSON listing: %v\n%s", err, out)
	}
	if got := as("billing", "billing-pass", "KEYS", "*"); got != "billing:job" {
		t.Fatalf("billing's KEYS *: %q, want only billing:job", got)
	}
	if got := as("ops", "ops-pass", "KEYS", "*"); strings.Count(got, "\n") != 2 {
		t.Fatalf("the admin's KEYS *: %q, want three names", got)
	}
	// Sessions: each user sees its own.
	as("billing", "billing-pass", "FENCE.SESSION", "OPEN", "60000")
	as("ops", "ops-pass", "FENCE.SESSION", "OPEN", "60000")
	out, _, code = clFencer(t, bin, follower, billing, "sessions")
	if code != 0 || strings.Count(out, " billing ") != 1 || strings.Contains(out, " ops ") {
		t.Fatalf("billing's sessions: exit %d\n%s", code, out)
	}
	out, _, _ = clFencer(t, bin, follower, admin, "sessions")
	if strings.Count(out, " billing ") != 1 || strings.Count(out, " ops ") != 1 {
		t.Fatalf("the admin's sessions:\n%s", out)
	}
	if got := as("billing", "billing-pass", "FENCE.SESSIONS", "USER", "ops"); !strings.HasPrefix(got, "NOPERM") {
		t.Fatalf("billing asking for ops's sessions: %q", got)
	}
}

// fencer watch follows a lock across the leader's death: every change is
// printed once, in position order, and the watch goes on under the new
// leader.
func TestOperatorWatchAcrossLeaderKill(t *testing.T) {
	c := startNodeCluster(t, 3)
	bin := clFencerBin(t)
	var addrs []string
	for _, d := range c.nodes {
		addrs = append(addrs, d.addr)
	}
	cmd := exec.Command(bin, "watch", "job")
	cmd.Env = append(os.Environ(), "FENCER_ADDR="+strings.Join(addrs, ","))
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitFor := func(what string, re *regexp.Regexp) {
		t.Helper()
		for deadline := time.Now().Add(15 * time.Second); !re.MatchString(out.String()); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("fencer watch never printed %s:\n%s", what, out.String())
			}
		}
	}
	waitFor("the state at the start", regexp.MustCompile(`reset free`))
	leader := c.leader(t)
	g1 := c.mustGrant(t, leader, clusterRetryWithin, "job", "alice", time.Minute)
	waitFor("alice's grant", regexp.MustCompile(fmt.Sprintf(`granted owner=alice token=%d`, g1.token)))
	c.nodes[leader].kill9(t)
	killedAt := time.Now()
	next, _ := c.awaitNewLeader(t, c.others(leader), c.ids[leader], killedAt, clusterElectionTimeout)
	if v, err := clusterCall(c.nodes[next].addr, clusterServerTimeout, "FENCE.RELEASE", "job", "alice"); err != nil || v != int64(1) {
		t.Fatalf("alice's release under the new leader: %v %v", v, err)
	}
	g2 := c.mustGrant(t, next, clusterRetryWithin, "job", "bob", time.Minute)
	waitFor("bob's grant after the leader's death", regexp.MustCompile(fmt.Sprintf(`granted owner=bob token=%d`, g2.token)))
	text := out.String()
	t.Logf("fencer watch across the kill of %s (%v before bob's grant showed):\n%s", c.ids[leader], time.Since(killedAt).Round(time.Millisecond), text)
	var kinds []string
	last := uint64(0)
	for _, m := range regexp.MustCompile(`position=(\d+) (\w+)`).FindAllStringSubmatch(text, -1) {
		pos, _ := strconv.ParseUint(m[1], 10, 64)
		if pos < last {
			t.Fatalf("position %d after %d:\n%s", pos, last, text)
		}
		last = pos
		kinds = append(kinds, m[2])
	}
	if got := strings.Join(kinds, " "); got != "reset granted released granted" {
		t.Fatalf("events %q, want reset granted released granted:\n%s", got, text)
	}
}

// syncBuffer is a bytes.Buffer safe for a process's writes and the test's
// reads at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
