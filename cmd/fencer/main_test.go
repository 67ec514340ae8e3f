package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fencerlock/fencer/redisbridge"
	"github.com/fencerlock/fencer/redisbridge/bridgetest"
	"github.com/redis/go-redis/v9"
)

// nodeAddr is the client address of a real single-node fencer server that
// TestMain runs in-process (bridgetest: Raft, its log store and the RESP bridge
// on loopback).
var nodeAddr string

func TestMain(m *testing.M) {
	// The supervisor's tests run the command under this binary as the
	// shim.
	if isShim(os.Args) {
		os.Exit(runShim(os.Args[2:]))
	}
	redis.SetLogger(quietLogger{})
	stop, addr, err := startNode()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fencer tests: starting a fencer node:", err)
		os.Exit(1)
	}
	nodeAddr = addr
	code := m.Run()
	stop()
	os.Exit(code)
}

func startNode() (stop func(), addr string, err error) {
	return startSecuredNode(nil, nil)
}

// startSecuredNode starts a one-node cluster in a temporary directory,
// with bmod, if not nil, applied to the configuration of its RESP bridge
// (authentication, TLS), and waits until it serves a client configured by
// warm.
func startSecuredNode(bmod func(*redisbridge.Config), warm func(*redis.Options)) (stop func(), addr string, err error) {
	n, err := bridgetest.Start(nil, bmod)
	if err != nil {
		return nil, "", err
	}
	stop = n.Close
	// Wait until the node has elected itself.
	ropts := &redis.Options{Addr: n.Addr, Protocol: 2, DisableIdentity: true}
	if warm != nil {
		warm(ropts)
	}
	r := redis.NewClient(ropts)
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.Do(ctx, "FENCE.STATUS", "warm-up").Err(); err != nil && err != redis.Nil {
		stop()
		return nil, "", err
	}
	return stop, n.Addr, nil
}

// result is one run of fencer.
type result struct {
	code           int
	stdout, stderr string
}

// fencer runs the command in-process against the test node (through
// FENCER_ADDR) and returns what it did.
func fencer(t *testing.T, args ...string) result {
	t.Helper()
	return fencerEnv(t, map[string]string{"FENCER_ADDR": nodeAddr}, args...)
}

func fencerEnv(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	var out, errOut syncBuffer
	code := run(args, nil, &out, &errOut, func(k string) string { return env[k] })
	return result{code, out.String(), errOut.String()}
}

// syncBuffer is a bytes.Buffer that a child process's output copier and the
// test may use at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// assignments parses fencer acquire's output.
func assignments(t *testing.T, out string) map[string]string {
	t.Helper()
	m := make(map[string]string)
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("output line %q is not an assignment", line)
		}
		m[k] = strings.Trim(v, "'")
	}
	return m
}

func TestAcquireExtendStatusRelease(t *testing.T) {
	r := fencer(t, "acquire", "cli-a", "--ttl", "20s")
	if r.code != 0 {
		t.Fatalf("acquire: exit %d, %s", r.code, r.stderr)
	}
	v := assignments(t, r.stdout)
	token, owner := v["FENCER_TOKEN"], v["FENCER_OWNER"]
	if v["FENCER_LOCK"] != "cli-a" || owner == "" {
		t.Fatalf("acquire printed %q", r.stdout)
	}
	if _, err := strconv.ParseUint(token, 10, 64); err != nil {
		t.Fatalf("FENCER_TOKEN %q: %v", token, err)
	}

	r = fencer(t, "status", "cli-a")
	want := regexp.MustCompile(`^owner=` + regexp.QuoteMeta(owner) + ` token=` + token + ` remaining=\d+(\.\d+)?s\n$`)
	if r.code != 0 || !want.MatchString(r.stdout) {
		t.Fatalf("status: exit %d, %q; want %v", r.code, r.stdout, want)
	}

	if r = fencer(t, "acquire", "cli-a"); r.code != 1 || !strings.Contains(r.stderr, "held by another owner") {
		t.Fatalf("second acquire: exit %d, stderr %q; want 1 and 'held by another owner'", r.code, r.stderr)
	}
	if r = fencer(t, "extend", "cli-a", owner, "--ttl", "30s"); r.code != 0 || r.stdout != "extended cli-a for 30s\n" {
		t.Fatalf("extend: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	if r = fencer(t, "extend", "cli-a", "someone-else"); r.code != 1 || !strings.Contains(r.stderr, "does not hold") {
		t.Fatalf("extend by a non-holder: exit %d, %q", r.code, r.stderr)
	}
	if r = fencer(t, "release", "cli-a", owner); r.code != 0 || r.stdout != "released cli-a\n" {
		t.Fatalf("release: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	if r = fencer(t, "release", "cli-a", owner); r.code != 0 {
		t.Fatalf("a repeated release: exit %d, %q", r.code, r.stderr)
	}
	if r = fencer(t, "status", "cli-a"); r.code != 0 || r.stdout != "free\n" {
		t.Fatalf("status after release: exit %d, %q", r.code, r.stdout)
	}
	if r = fencer(t, "release", "cli-a", "someone-else"); r.code != 1 {
		t.Fatalf("release by a non-holder: exit %d", r.code)
	}
}

func TestAcquireWaitsWithWait(t *testing.T) {
	if r := fencer(t, "acquire", "cli-wait", "--ttl", "1s"); r.code != 0 {
		t.Fatalf("acquire: exit %d, %s", r.code, r.stderr)
	}
	start := time.Now()
	r := fencer(t, "acquire", "cli-wait", "--wait", "10s")
	if r.code != 0 {
		t.Fatalf("acquire --wait: exit %d, %s", r.code, r.stderr)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("acquire --wait took %v for a lease of 1s", took)
	}
	if r := fencer(t, "release", "cli-wait", assignments(t, r.stdout)["FENCER_OWNER"]); r.code != 0 {
		t.Fatalf("release: exit %d, %s", r.code, r.stderr)
	}
}

func TestLockRunsTheCommandWithTheToken(t *testing.T) {
	r := fencer(t, "lock", "cli-build", "--", "sh", "-c", `echo $FENCER_TOKEN; echo "$FENCER_LOCK" >&2`)
	if r.code != 0 {
		t.Fatalf("lock: exit %d, %s", r.code, r.stderr)
	}
	if !regexp.MustCompile(`^[1-9][0-9]*\n$`).MatchString(r.stdout) {
		t.Fatalf("stdout %q is not just the token", r.stdout)
	}
	if r.stderr != "cli-build\n" {
		t.Fatalf("stderr %q, want the command's only", r.stderr)
	}
	if s := fencer(t, "status", "cli-build"); s.stdout != "free\n" {
		t.Fatalf("after the command the lock is %q, want free", s.stdout)
	}
}

func TestLockExitStatus(t *testing.T) {
	if r := fencer(t, "lock", "cli-exit", "sh", "-c", "exit 3"); r.code != 3 || r.stderr != "" {
		t.Errorf("command exiting 3: fencer exit %d, stderr %q", r.code, r.stderr)
	}
	if r := fencer(t, "lock", "cli-exit", "--", "sh", "-c", "kill -TERM $$"); r.code != 128+15 {
		t.Errorf("command killed by SIGTERM: fencer exit %d", r.code)
	}
	if r := fencer(t, "lock", "cli-exit", "--", "no-such-command-here"); r.code != 127 {
		t.Errorf("missing command: exit %d", r.code)
	}
	if r := fencer(t, "lock", "cli-exit", "--", "/dev/null"); r.code != 126 {
		t.Errorf("a command that cannot run: exit %d", r.code)
	}
	held := fencer(t, "acquire", "cli-exit", "--ttl", "20s")
	defer fencer(t, "release", "cli-exit", assignments(t, held.stdout)["FENCER_OWNER"])
	if r := fencer(t, "lock", "--wait", "300ms", "cli-exit", "true"); r.code != 125 || !strings.Contains(r.stderr, "deadline exceeded") {
		t.Errorf("lock held elsewhere with --wait 300ms: exit %d, stderr %q", r.code, r.stderr)
	}
}

// A lease taken away while the command runs (here, revoked by an operator)
// stops the command, and what the command started.
func TestLockStopsTheCommandWhenTheLeaseIsLost(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	done := make(chan result, 1)
	go func() {
		done <- fencer(t, "lock", "--ttl", "1500ms", "cli-lost", "--", "sh", "-c", "sleep 30 & echo $! > "+pidFile+"; wait")
	}()
	rdb := redis.NewClient(&redis.Options{Addr: nodeAddr, Protocol: 2, DisableIdentity: true})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		if n, _ := rdb.Do(ctx, "FENCE.REVOKE", "cli-lost").Int(); n == 1 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the lock was never taken")
		}
		time.Sleep(50 * time.Millisecond)
	}
	revoked := time.Now()
	select {
	case r := <-done:
		if r.code != 128+15 || !strings.Contains(r.stderr, "lost the lock") || r.stdout != "" {
			t.Fatalf("exit %d, stdout %q, stderr %q; want 143 and a lost-lock message", r.code, r.stdout, r.stderr)
		}
		if took := time.Since(revoked); took > 3*time.Second {
			t.Fatalf("command stopped %v after the revoke; renewals run every 500ms", took)
		}
		b, err := os.ReadFile(pidFile)
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		// Reaped by init or not, a killed process soon stops existing.
		deadline := time.Now().Add(5 * time.Second)
		for syscall.Kill(pid, 0) == nil && !zombie(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("the command's child %d still runs", pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the command still runs 10s after its lock was revoked")
	}
}

func TestMembers(t *testing.T) {
	r := fencer(t, "members")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], "ID") ||
		!strings.Contains(lines[1], nodeAddr) || !strings.Contains(lines[1], " leader ") || !strings.Contains(lines[1], " healthy ") {
		t.Fatalf("members: exit %d, %q", r.code, r.stdout)
	}
	if r := fencer(t, "remove", "no-such-node"); r.code != 1 || !strings.Contains(r.stderr, "no such member") {
		t.Fatalf("remove of a non-member: exit %d, %q", r.code, r.stderr)
	}
}

func TestAddressSources(t *testing.T) {
	dead := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().String()
	}()
	// --addr wins over FENCER_ADDR.
	r := fencerEnv(t, map[string]string{"FENCER_ADDR": nodeAddr}, "--addr", dead, "--timeout", "500ms", "status", "x")
	if r.code != 1 || !strings.Contains(r.stderr, "no fencer node answers at "+dead+" (from --addr)") {
		t.Fatalf("--addr of a dead node: exit %d, %q", r.code, r.stderr)
	}
	// A list: the dead node is skipped.
	r = fencerEnv(t, map[string]string{"FENCER_ADDR": dead + "," + nodeAddr}, "status", "x")
	if r.code != 0 || r.stdout != "free\n" {
		t.Fatalf("FENCER_ADDR with a dead and a live node: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	// Neither: the default.
	a := &app{getenv: func(string) string { return "" }}
	if err := a.resolveAddrs(a.rootCommand()); err != nil || len(a.addrs) != 1 || a.addrs[0] != "127.0.0.1:7379" {
		t.Fatalf("default address: %v, %v", a.addrs, err)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"acquire"},
		{"release", "x"},
		{"lock", "x"},
		{"lock", "x", "--"},
		{"status", "--no-such-flag", "x"},
		{"no-such-command"},
		{"--timeout", "0s", "status", "x"},
	} {
		if r := fencer(t, args...); r.code != 2 || !strings.Contains(r.stderr, "fencer --help") {
			t.Errorf("fencer %s: exit %d, stderr %q; want 2 and a hint", strings.Join(args, " "), r.code, r.stderr)
		}
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"abc-_09":  "abc-_09",
		"a b":      "'a b'",
		"it's":     `'it'\''s'`,
		"":         "''",
		"$(rm -r)": "'$(rm -r)'",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

// zombie reports whether pid has exited but is not reaped yet.
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesized command name.
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}
