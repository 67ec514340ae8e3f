package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencerlock/fencer/client"
	"github.com/redis/go-redis/v9"
)

// The lease is a *client.Lease from the test node; fencer elect passes its
// leadership instead.
var _ renewable = (*client.Lease)(nil)

// superviseLease takes the lock name on the test node with ttl, renewed in
// the background if renew is set, and releases it at the end of the test.
func superviseLease(t *testing.T, name string, ttl time.Duration, renew bool) *client.Lease {
	t.Helper()
	c, err := client.New([]string{nodeAddr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	opts := []client.LeaseOption{client.WithTTL(ttl)}
	if renew {
		opts = append(opts, client.WithAutoRenew())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := c.Acquire(ctx, name, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = l.Release(ctx)
	})
	return l
}

// superviseRun runs the shell script under l with grace and returns the
// exit code run gives it and what the supervisor wrote.
func superviseRun(t *testing.T, l *client.Lease, grace time.Duration, script string) (code int, stderr string) {
	t.Helper()
	var errOut syncBuffer
	sigs, stop := catchSignals()
	defer stop()
	s := &supervisor{hold: l, grace: grace, what: "the lock " + strconv.Quote(l.Name()), cause: l.Err, stderr: &errOut}
	err := s.run(exec.Command("sh", "-c", script), sigs)
	var ee *exitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.code
	default:
		t.Fatalf("run: %v", err)
	}
	return code, errOut.String()
}

// stamps reads the lines "<word> <unix ns>" of path into word -> times.
func stamps(t *testing.T, path string) map[string][]int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := make(map[string][]int64)
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		w, ns, ok := strings.Cut(line, " ")
		n, err := strconv.ParseInt(ns, 10, 64)
		if !ok || err != nil {
			continue // a line cut short by SIGKILL
		}
		m[w] = append(m[w], n)
	}
	return m
}

// A lease that is not renewed: the command, which ignores SIGTERM, gets it
// when grace is left and is killed by the end of the validity.
func TestSuperviseKillsByTheValidityEnd(t *testing.T) {
	const ttl, grace = 1200 * time.Millisecond, 400 * time.Millisecond
	log := filepath.Join(t.TempDir(), "log")
	l := superviseLease(t, "sup-validity", ttl, false)
	until := l.Until()
	code, stderr := superviseRun(t, l, grace, `trap 'echo term $(date +%s%N) >> `+log+`' TERM
while :; do echo tick $(date +%s%N) >> `+log+`; sleep 0.02; done`)
	if code != 128+int(syscall.SIGKILL) || !strings.Contains(stderr, `could not renew the lock "sup-validity"`) {
		t.Fatalf("exit %d, stderr %q; want 137 and why", code, stderr)
	}
	s := stamps(t, log)
	ticks, terms := s["tick"], s["term"]
	if len(ticks) == 0 || len(terms) != 1 {
		t.Fatalf("ticks %d, SIGTERMs %d; want ticks and one SIGTERM", len(ticks), len(terms))
	}
	termAt := until.Add(-grace).UnixNano()
	if terms[0] < termAt {
		t.Errorf("SIGTERM %v before validity end - grace", time.Duration(termAt-terms[0]))
	}
	if last := ticks[len(ticks)-1]; last >= until.UnixNano() {
		t.Errorf("the command still wrote %v after the validity ended", time.Duration(last-until.UnixNano()))
	}
}

// A renewed lease: the supervisor's timer finds Until moved and sleeps
// again; the command runs to its end, many TTLs later.
func TestSuperviseFollowsRenewals(t *testing.T) {
	l := superviseLease(t, "sup-renewed", 600*time.Millisecond, true)
	code, stderr := superviseRun(t, l, 200*time.Millisecond, "sleep 2; exit 4")
	if code != 4 || stderr != "" {
		t.Fatalf("exit %d, stderr %q; want the command's 4 and nothing else", code, stderr)
	}
}

// A revoked lease: SIGTERM as soon as the renewal learns it, and SIGKILL
// grace later, long before the old validity would have ended.
func TestSuperviseStopsAtOnceWhenLost(t *testing.T) {
	const ttl, grace = 3 * time.Second, 300 * time.Millisecond
	dir := t.TempDir()
	log, ready := filepath.Join(dir, "log"), filepath.Join(dir, "ready")
	l := superviseLease(t, "sup-lost", ttl, true)
	go func() {
		awaitFile(t, ready, 5*time.Second)
		r := fencer(t, "status", "sup-lost") // the lock is ours
		if !strings.HasPrefix(r.stdout, "owner=") {
			t.Errorf("status: %q", r.stdout)
		}
		revokeLock(t, "sup-lost")
	}()
	start := time.Now()
	code, stderr := superviseRun(t, l, grace, `trap 'echo term $(date +%s%N) >> `+log+`' TERM; touch `+ready+`
while :; do echo tick $(date +%s%N) >> `+log+`; sleep 0.02; done`)
	if code != 137 || !strings.Contains(stderr, `lost the lock "sup-lost"`) {
		t.Fatalf("exit %d, stderr %q; want 137 and the lost lock", code, stderr)
	}
	// Renewals run every TTL/3: the loss is known within one, plus grace.
	if took := time.Since(start); took > ttl {
		t.Errorf("the command ran %v; want it stopped within a renewal period and grace", took)
	}
	s := stamps(t, log)
	if ticks, terms := s["tick"], s["term"]; len(terms) != 1 || ticks[len(ticks)-1]-terms[0] > int64(grace+time.Second) {
		t.Errorf("SIGTERM %v, last tick %v: want SIGKILL grace after SIGTERM", terms, ticks[len(ticks)-1])
	}
}

// Signals sent to fencer reach the command, which handles them and goes
// on; fencer returns with the command's status once it exits.
func TestSuperviseForwardsSignals(t *testing.T) {
	dir := t.TempDir()
	log, ready := filepath.Join(dir, "log"), filepath.Join(dir, "ready")
	l := superviseLease(t, "sup-signals", 5*time.Second, true)
	sent := []syscall.Signal{syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT}
	go func() {
		awaitFile(t, ready, 5*time.Second)
		for i, sig := range sent {
			_ = syscall.Kill(os.Getpid(), sig)
			awaitLines(t, log, i+1)
		}
		_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
	}()
	script := `for s in USR1 USR2 HUP INT QUIT; do trap "echo $s >> ` + log + `" $s; done
trap 'echo TERM >> ` + log + `; exit 7' TERM
touch ` + ready + `; while :; do sleep 0.02; done`
	code, stderr := superviseRun(t, l, time.Second, script)
	b, _ := os.ReadFile(log)
	if code != 7 || stderr != "" || string(b) != "USR1\nUSR2\nHUP\nINT\nQUIT\nTERM\n" {
		t.Fatalf("exit %d, stderr %q, the command saw %q", code, stderr, b)
	}
	if err := l.Err(); err != nil {
		t.Fatalf("the lease ended while the command ran: %v", err)
	}
}

// What the command leaves running when it exits is killed before the lock
// is released.
func TestSuperviseKillsWhatTheCommandLeft(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	l := superviseLease(t, "sup-left", 5*time.Second, true)
	if code, _ := superviseRun(t, l, time.Second, "sleep 1000 & echo $! > "+pidFile); code != 0 {
		t.Fatalf("exit %d", code)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	awaitGone(t, pid)
}

func TestSuperviseGraceBounds(t *testing.T) {
	for _, c := range []struct {
		grace, ttl time.Duration
		ok         bool
	}{{0, time.Second, true}, {500 * time.Millisecond, time.Second, true}, {501 * time.Millisecond, time.Second, false}, {-1, time.Second, false}} {
		if err := checkGrace(c.grace, c.ttl); (err == nil) != c.ok {
			t.Errorf("checkGrace(%v, %v) = %v", c.grace, c.ttl, err)
		}
	}
	if r := fencer(t, "lock", "--ttl", "3s", "--grace", "2s", "sup-bounds", "true"); r.code != exitUsage || !strings.Contains(r.stderr, "--grace") {
		t.Errorf("--grace beyond half the TTL: exit %d, %q", r.code, r.stderr)
	}
	if r := fencer(t, "lock", "--kill-after", "1s", "sup-bounds", "true"); r.code != 0 || r.stderr != "" {
		t.Errorf("deprecated --kill-after: exit %d, %q; want accepted and ignored", r.code, r.stderr)
	}
}

// revokeLock force-frees name on the test node, as an operator would.
func revokeLock(t *testing.T, name string) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: nodeAddr, Protocol: 2, DisableIdentity: true})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if n, err := rdb.Do(ctx, "FENCE.REVOKE", name).Int(); n != 1 {
		t.Errorf("FENCE.REVOKE %s: %d, %v", name, n, err)
	}
}

// awaitFile waits until path exists.
func awaitFile(t *testing.T, path string, within time.Duration) {
	deadline := time.Now().Add(within)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s did not appear within %v", filepath.Base(path), within)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// awaitLines waits until path has n lines.
func awaitLines(t *testing.T, path string, n int) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		if strings.Count(string(b), "\n") >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s has %q, want %d lines", filepath.Base(path), b, n)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// awaitGone waits until pid no longer runs: reaped, or a zombie (killed,
// and left to init to reap).
func awaitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(pid, 0) == nil && !zombie(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A grant with no more than twice grace left is renewed before the command
// starts, so that the supervisor does not stop the command at once; one
// with more is left as it is.
func TestLockFreshensASpentGrant(t *testing.T) {
	const ttl, grace = 900 * time.Millisecond, 300 * time.Millisecond
	l := superviseLease(t, "sup-fresh", ttl, false)
	before := l.Until()
	freshen(context.Background(), l, grace)
	if !l.Until().Equal(before) {
		t.Errorf("a fresh grant was renewed: validity end %v, was %v", l.Until(), before)
	}
	time.Sleep(time.Until(before.Add(-2 * grace)))
	freshen(context.Background(), l, grace)
	if left := time.Until(l.Until()); left <= 2*grace {
		t.Fatalf("after freshen %v of the validity is left; want more than %v", left, 2*grace)
	}
}

// A stopped command (Ctrl-Z, SIGSTOP) is continued after its SIGTERM, so
// that it can handle it before SIGKILL.
func TestSuperviseContinuesAStoppedCommand(t *testing.T) {
	ready := filepath.Join(t.TempDir(), "ready")
	l := superviseLease(t, "sup-stopped", 3*time.Second, true)
	go func() {
		awaitFile(t, ready, 5*time.Second)
		time.Sleep(100 * time.Millisecond) // for the kill -STOP
		revokeLock(t, "sup-stopped")
	}()
	code, stderr := superviseRun(t, l, 900*time.Millisecond, `trap 'exit 5' TERM; touch `+ready+`; kill -STOP $$; sleep 10`)
	if code != 5 || !strings.Contains(stderr, "lost the lock") {
		t.Fatalf("exit %d, stderr %q; want 5, from the command's SIGTERM trap, after the revoke", code, stderr)
	}
}

// If the shim is killed, the kernel kills the command (its parent-death
// signal), fencer kills what the command started, and says so.
func TestSuperviseShimKilled(t *testing.T) {
	dir := t.TempDir()
	ready, childFile, shimFile := filepath.Join(dir, "ready"), filepath.Join(dir, "child"), filepath.Join(dir, "shim")
	l := superviseLease(t, "sup-shim", 5*time.Second, true)
	go func() {
		awaitFile(t, ready, 5*time.Second)
		b, _ := os.ReadFile(shimFile)
		shim, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		_ = syscall.Kill(shim, syscall.SIGKILL)
	}()
	code, stderr := superviseRun(t, l, time.Second, `trap '' TERM; sleep 1000 & echo $! > `+childFile+`; echo $PPID > `+shimFile+`; touch `+ready+`; sleep 1000`)
	if code != 137 || !strings.Contains(stderr, "shim ended") {
		t.Fatalf("exit %d, stderr %q; want 137, the shim's SIGKILL, and what happened", code, stderr)
	}
	b, err := os.ReadFile(childFile)
	if err != nil {
		t.Fatal(err)
	}
	child, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	awaitGone(t, child)
}
