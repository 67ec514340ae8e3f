package integration

// fencer elect runs its command only while this process leads the election,
// and stops it before leadership can pass to another campaigner, with the
// supervisor of fencer lock (supervise_test.go). The same list: Consul's
// `consul lock` bug reports (hashicorp/consul#9788, #2022, #797, #1210),
// and the command's last action before the next leader's first. Each test
// runs the built fencer against a real fencerd, with short TTLs.

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// elHolder returns the election's leader as FENCE.HOLDER gives it (owner,
// epoch, remaining-ms, session, value), failing if there is none.
func elHolder(t *testing.T, d *daemon, name string) []string {
	t.Helper()
	out := cli(t, d, "FENCE.HOLDER", name)
	if len(out) != 5 {
		t.Fatalf("FENCE.HOLDER %s: %q, want a leader", name, out)
	}
	return out
}

// elRevokeSession ends the session the election's leader leads under, as an
// operator would with redis-cli.
func elRevokeSession(t *testing.T, d *daemon, name string) {
	t.Helper()
	id := elHolder(t, d, name)[3]
	if out := cli(t, d, "FENCE.SESSION", "REVOKE", id); len(out) != 1 || out[0] != "1" {
		t.Fatalf("FENCE.SESSION REVOKE %s: %q", id, out)
	}
}

// elEpochs reads the lines "epoch N" of path.
func elEpochs(t *testing.T, path string) []uint64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var epochs []uint64
	for _, line := range clLines(string(b)) {
		if v, ok := strings.CutPrefix(line, "epoch "); ok {
			e, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			epochs = append(epochs, e)
		}
	}
	return epochs
}

// elStartWithMetrics starts a fencerd that serves /metrics, and returns it
// and the address of its metrics.
func elStartWithMetrics(t *testing.T) (*daemon, string) {
	t.Helper()
	ports := freePorts(t, 3)
	d := newDaemon(t.TempDir(), ports[0], ports[1])
	metrics := net.JoinHostPort("127.0.0.1", ports[2])
	d.args = append(d.args, "--http-listen", metrics)
	d.start(t)
	return d, metrics
}

// elAwaitWaiters waits until the node has n acquires queued (fencer_waiters),
// so that the test knows a campaigner has joined the line.
func elAwaitWaiters(t *testing.T, metrics string, n int) {
	t.Helper()
	deadline := time.Now().Add(requestTimeout)
	last := "none"
	for {
		if v, err := elGauge(metrics, "fencer_waiters"); err == nil {
			if v == n {
				return
			}
			last = strconv.Itoa(v)
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			t.Fatalf("fencer_waiters is %s after %v, want %d", last, requestTimeout, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// elGauge reads one gauge without labels from the node's /metrics.
func elGauge(metrics, name string) (int, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + metrics + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return int(f), err
		}
	}
	return 0, fmt.Errorf("no %s in /metrics", name)
}

// Three fencer elect on one election lead one after the other, in the order
// they campaigned: each command starts after the one before exited, sees
// the election's name and an epoch larger than the one before, and the
// last one resigns when its command exits.
func TestCLIElectTakesTurnsInArrivalOrder(t *testing.T) {
	d, metrics := elStartWithMetrics(t)
	bin := clFencerBin(t)
	dir := t.TempDir()
	log, ready, proceed := filepath.Join(dir, "log"), filepath.Join(dir, "ready"), filepath.Join(dir, "go")
	turn := func(who, wait string) string {
		return fmt.Sprintf(`echo "start %s $FENCER_EPOCH $FENCER_ELECTION" >> %s; %s; echo "end %s" >> %s`, who, log, wait, who, log)
	}
	a := svStart(t, bin, d.addr, nil, "elect", "--ttl", "3s", "turns", "--",
		"sh", "-c", turn("a", fmt.Sprintf(`touch %s; while [ ! -e %s ]; do sleep 0.02; done`, ready, proceed)))
	a.awaitReady(t, ready)
	if v := elHolder(t, d, "turns")[4]; !strings.Contains(v, "/") {
		t.Errorf("the leader's value is %q, want the default HOST/PID", v)
	}
	b := svStart(t, bin, d.addr, nil, "elect", "--ttl", "3s", "--value", "b", "turns", "--", "sh", "-c", turn("b", "sleep 0.2"))
	elAwaitWaiters(t, metrics, 1)
	c := svStart(t, bin, d.addr, nil, "elect", "--ttl", "3s", "--value", "c", "turns", "--", "sh", "-c", turn("c", "sleep 0.2"))
	elAwaitWaiters(t, metrics, 2)
	if err := os.WriteFile(proceed, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*svRun{a, b, c} {
		if code := r.wait(t, 10*time.Second); code != 0 || r.out.String() != "" || r.errOut.String() != "" {
			t.Fatalf("fencer %v: exit %d, stdout %q, stderr %q; want 0 and no output", r.cmd.Args[1:], code, r.out, r.errOut)
		}
	}
	b2, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	lines := clLines(string(b2))
	var epochs []uint64
	for i, who := range []string{"a", "b", "c"} {
		var e uint64
		if len(lines) == 6 {
			f := strings.Fields(lines[2*i])
			if len(f) == 4 && f[0] == "start" && f[1] == who && f[3] == "turns" && lines[2*i+1] == "end "+who {
				e, _ = strconv.ParseUint(f[2], 10, 64)
			}
		}
		if e == 0 || (i > 0 && e <= epochs[i-1]) {
			t.Fatalf("the leaders did not take turns in arrival order with growing epochs:\n%s", b2)
		}
		epochs = append(epochs, e)
	}
	t.Logf("epochs %v", epochs)
	if out := cli(t, d, "FENCE.HOLDER", "turns"); len(out) != 1 || out[0] != "" {
		t.Fatalf("after the last command the election's leader is %q, want none", out)
	}
}

// hashicorp/consul#9788: the leader's session is revoked while the command
// runs. The command, deaf to SIGTERM, is killed at the latest when the
// validity it had at the revoke ends, and fencer says why.
func TestCLIElectSupervise9788Revoked(t *testing.T) {
	d := startFencerd(t)
	bin := clFencerBin(t)
	dir := t.TempDir()
	log, ready := filepath.Join(dir, "log"), filepath.Join(dir, "ready")
	const ttl = 2 * time.Second
	r := svStart(t, bin, d.addr, nil, "elect", "--ttl", ttl.String(), "rev", "--", "sh", "-c", svTicker("tick", log, ready))
	r.awaitReady(t, ready)
	elRevokeSession(t, d, "rev")
	revoked := time.Now()
	code := r.wait(t, ttl+5*time.Second)
	ticks := svStamps(t, log, "tick")
	last := ticks[len(ticks)-1]
	t.Logf("last write %v after the revoke (TTL %v)", last.Sub(revoked).Round(time.Millisecond), ttl)
	if code != 137 || !strings.Contains(r.errOut.String(), `lost the leadership of "rev"`) {
		t.Fatalf("exit %d, stderr %q; want 137 (SIGKILL) and the lost leadership", code, r.errOut)
	}
	if !last.Before(revoked.Add(ttl)) {
		t.Fatalf("the command wrote %v after the revoke, beyond the session's validity (%v)", last.Sub(revoked), ttl)
	}
}

// hashicorp/consul#9788 again: the only node stops (SIGSTOP), so no
// keepalive succeeds. The last one was sent before the stop, so the
// validity ends within a TTL of it; the command, deaf to SIGTERM, is dead
// by then.
func TestCLIElectSupervise9788CutOff(t *testing.T) {
	d := startFencerd(t)
	bin := clFencerBin(t)
	dir := t.TempDir()
	log, ready := filepath.Join(dir, "log"), filepath.Join(dir, "ready")
	const ttl = 2 * time.Second
	r := svStart(t, bin, d.addr, nil, "elect", "--ttl", ttl.String(), "cutoff", "--", "sh", "-c", svTicker("tick", log, ready))
	r.awaitReady(t, ready)
	d.clStop(t)
	cut := time.Now()
	code := r.wait(t, ttl+5*time.Second)
	ticks := svStamps(t, log, "tick")
	last := ticks[len(ticks)-1]
	t.Logf("last write %v after the node stopped (TTL %v)", last.Sub(cut).Round(time.Millisecond), ttl)
	if code != 137 || !strings.Contains(r.errOut.String(), `could not renew the leadership of "cutoff"`) {
		t.Fatalf("exit %d, stderr %q; want 137 (SIGKILL) and why", code, r.errOut)
	}
	if !last.Before(cut.Add(ttl)) {
		t.Fatalf("the command wrote %v after the node stopped, beyond the session's validity (%v)", last.Sub(cut), ttl)
	}
}

// The leader's command's last write comes before the next leader's first.
// The first fencer reaches the node through a proxy that the test cuts: its
// session can no longer be kept alive, the server ends it after the TTL and
// elects the second fencer, campaigning meanwhile. The first command
// ignores SIGTERM, so only the SIGKILL by the end of the validity stops
// it.
func TestCLIElectSuperviseStopsBeforeNextLeader(t *testing.T) {
	d, metrics := elStartWithMetrics(t)
	bin := clFencerBin(t)
	dir := t.TempDir()
	log, ready := filepath.Join(dir, "log"), filepath.Join(dir, "ready")
	p := svProxy(t, d.addr)
	const ttl = 2 * time.Second
	first := svStart(t, bin, p.addr(), nil, "elect", "--ttl", ttl.String(), "next", "--",
		"sh", "-c", `echo epoch $FENCER_EPOCH >> `+log+`; `+svTicker("first", log, ready))
	first.awaitReady(t, ready)
	second := svStart(t, bin, d.addr, nil, "elect", "--ttl", ttl.String(), "--wait", "20s", "next", "--",
		"sh", "-c", `echo second $(date +%s%N) >> `+log+`; echo epoch $FENCER_EPOCH >> `+log)
	elAwaitWaiters(t, metrics, 1)
	p.cut()
	if code := first.wait(t, ttl+5*time.Second); code != 137 {
		t.Fatalf("first fencer: exit %d, stderr %q; want 137", code, first.errOut)
	}
	if code := second.wait(t, ttl+10*time.Second); code != 0 {
		t.Fatalf("second fencer: exit %d, stderr %q", code, second.errOut)
	}
	firsts, seconds := svStamps(t, log, "first"), svStamps(t, log, "second")
	last, next := firsts[len(firsts)-1], seconds[0]
	t.Logf("the next leader's first write came %v after the last write of the first", next.Sub(last))
	if !last.Before(next) {
		t.Fatalf("the first command wrote %v after the next leader's first write", last.Sub(next))
	}
	epochs := elEpochs(t, log)
	if len(epochs) != 2 || epochs[0] >= epochs[1] {
		t.Fatalf("epochs %v: want the next leader's larger", epochs)
	}
}

// hashicorp/consul#2022: the command starts a grandchild that ignores
// SIGTERM. When leadership is lost, the whole group is stopped: no process
// of it is left. And when the command exits by itself, what it left running
// is killed before fencer resigns.
func TestCLIElectSupervise2022Grandchild(t *testing.T) {
	d := startFencerd(t)
	bin := clFencerBin(t)
	for _, c := range []struct {
		name, stop string
		code       int
	}{
		{"revoked", "while :; do sleep 0.05; done", 143}, // sh dies of SIGTERM
		{"exited", "while [ ! -e go ]; do sleep 0.02; done; exit 3", 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			ready, pgidFile := filepath.Join(dir, "ready"), filepath.Join(dir, "pgid")
			script := fmt.Sprintf(`cd %s; sh -c 'trap "" TERM; exec sleep 1000' & echo $$ > %s; touch %s; %s`, dir, pgidFile, ready, c.stop)
			r := svStart(t, bin, d.addr, nil, "elect", "--ttl", "2s", "gc-"+c.name, "--", "sh", "-c", script)
			r.awaitReady(t, ready)
			pgid := svReadInt(t, pgidFile)
			t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
			if n := len(svGroup(pgid)); n < 2 {
				t.Fatalf("the command's group %d has %d processes; want the command and its child", pgid, n)
			}
			if c.name == "revoked" {
				elRevokeSession(t, d, "gc-"+c.name)
			} else if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if code := r.wait(t, 10*time.Second); code != c.code {
				t.Fatalf("exit %d, stderr %q; want %d", code, r.errOut, c.code)
			}
			svAwaitGroupGone(t, pgid)
		})
	}
}

// hashicorp/consul#797, #1210: signals sent to fencer reach the command,
// which handles them and goes on leading; fencer exits with the command's
// status once it exits, and resigns.
func TestCLIElectSupervise797Signals(t *testing.T) {
	d := startFencerd(t)
	bin := clFencerBin(t)
	dir := t.TempDir()
	log, ready := filepath.Join(dir, "log"), filepath.Join(dir, "ready")
	// (sh's own reports of its sleeps killed by the signals go to
	// /dev/null.)
	script := `exec 2>/dev/null; for s in USR1 USR2 HUP INT QUIT; do trap "echo $s >> ` + log + `" $s; done
trap 'echo TERM >> ` + log + `; exit 7' TERM
touch ` + ready + `; while :; do sleep 0.02; done`
	r := svStart(t, bin, d.addr, nil, "elect", "--ttl", "2s", "sig", "--", "sh", "-c", script)
	r.awaitReady(t, ready)
	epoch := elHolder(t, d, "sig")[1]
	for i, sig := range []syscall.Signal{syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT} {
		if err := r.cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		svAwaitLines(t, log, i+1)
	}
	if now := elHolder(t, d, "sig")[1]; now != epoch {
		t.Fatalf("after the signals the epoch is %s, want still %s", now, epoch)
	}
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code := r.wait(t, 10*time.Second)
	b, _ := os.ReadFile(log)
	if code != 7 || r.errOut.String() != "" || string(b) != "USR1\nUSR2\nHUP\nINT\nQUIT\nTERM\n" {
		t.Fatalf("exit %d, stderr %q, the command saw %q; want 7, nothing, and every signal", code, r.errOut, b)
	}
	if out := cli(t, d, "FENCE.HOLDER", "sig"); len(out) != 1 || out[0] != "" {
		t.Fatalf("after fencer exited the election's leader is %q, want none", out)
	}
}

// SIGINT, SIGTERM and SIGHUP while campaigning end the campaign: fencer
// exits 125 without running the command, and its place in the line is
// gone (the leader's resignation leaves the election without a leader).
func TestCLIElectSignalStopsTheCampaign(t *testing.T) {
	d, metrics := elStartWithMetrics(t)
	bin := clFencerBin(t)
	dir := t.TempDir()
	ready, proceed, ran := filepath.Join(dir, "ready"), filepath.Join(dir, "go"), filepath.Join(dir, "ran")
	leader := svStart(t, bin, d.addr, nil, "elect", "--ttl", "3s", "camp", "--",
		"sh", "-c", fmt.Sprintf(`touch %s; while [ ! -e %s ]; do sleep 0.02; done`, ready, proceed))
	leader.awaitReady(t, ready)
	for i, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		r := svStart(t, bin, d.addr, nil, "elect", "--ttl", "3s", "camp", "--", "touch", ran)
		elAwaitWaiters(t, metrics, 1)
		if err := r.cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		if code := r.wait(t, 5*time.Second); code != 125 || !strings.Contains(r.errOut.String(), "canceled") {
			t.Fatalf("campaigner %d, sent %v: exit %d, stderr %q; want 125", i, sig, code, r.errOut)
		}
		elAwaitWaiters(t, metrics, 0)
	}
	if err := os.WriteFile(proceed, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if code := leader.wait(t, 5*time.Second); code != 0 {
		t.Fatalf("leader: exit %d, stderr %q", code, leader.errOut)
	}
	if out := cli(t, d, "FENCE.HOLDER", "camp"); len(out) != 1 || out[0] != "" {
		t.Fatalf("after the leader resigned the election's leader is %q, want none", out)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Fatal("a campaigner stopped by a signal ran its command")
	}
}
