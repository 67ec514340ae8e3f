package integration

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
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
		if m.Healthy == down || m.Reachable == down || (down && m.LastAnswerMS < 2000) || (!down && m.Applied == 0) {
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

// grepLines returns the lines of text that contain s.
func grepLines(text, s string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
