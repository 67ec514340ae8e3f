//go:build linux

package chaos

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// Tests of the checkers on small made-up histories: each must accept a
// correct history and reject the violation it exists for.

func TestLinModel(t *testing.T) {
	op := func(client int, kind linKind, owner string, out linOutput, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: linInput{kind, "k", owner}, Output: out, Call: call, Return: ret}
	}
	granted := func(tok uint64) linOutput { return linOutput{ok: true, token: tok} }
	tests := []struct {
		name string
		ops  []porcupine.Operation
		want bool
	}{
		{"acquire, status, release, status", []porcupine.Operation{
			op(0, linAcquire, "a", granted(5), 0, 10),
			op(1, linStatus, "", linOutput{ok: true, owner: "a", token: 5}, 11, 12),
			op(0, linRelease, "a", linOutput{ok: true}, 13, 14),
			op(1, linStatus, "", linOutput{}, 15, 16),
		}, true},
		{"two holders at once", []porcupine.Operation{
			op(0, linAcquire, "a", granted(5), 0, 10),
			op(1, linAcquire, "b", granted(7), 11, 12),
		}, false},
		{"concurrent acquires, one refused", []porcupine.Operation{
			op(0, linAcquire, "a", granted(5), 0, 10),
			op(1, linAcquire, "b", linOutput{}, 1, 9),
		}, true},
		{"token goes back", []porcupine.Operation{
			op(0, linAcquire, "a", granted(9), 0, 1),
			op(0, linRelease, "a", linOutput{ok: true}, 2, 3),
			op(1, linAcquire, "b", granted(7), 4, 5),
		}, false},
		{"stale read after release", []porcupine.Operation{
			op(0, linAcquire, "a", granted(5), 0, 1),
			op(0, linRelease, "a", linOutput{ok: true}, 2, 3),
			op(1, linStatus, "", linOutput{ok: true, owner: "a", token: 5}, 4, 5),
		}, false},
		{"unknown acquire that took effect", []porcupine.Operation{
			op(0, linAcquire, "a", linOutput{unknown: true}, 0, 100),
			op(1, linStatus, "", linOutput{ok: true, owner: "a", token: 3}, 5, 6),
			op(1, linAcquire, "b", linOutput{}, 7, 8),
		}, true},
		{"unknown acquire that never took effect", []porcupine.Operation{
			op(0, linAcquire, "a", linOutput{unknown: true}, 0, 100),
			op(1, linAcquire, "b", granted(4), 5, 6),
		}, true},
		{"repeated release remembered", []porcupine.Operation{
			op(0, linAcquire, "a", granted(5), 0, 1),
			op(0, linRelease, "a", linOutput{unknown: true}, 2, 100),
			op(0, linRelease, "a", linOutput{ok: true}, 3, 4),
		}, true},
		{"release by a non-holder succeeds", []porcupine.Operation{
			op(0, linAcquire, "a", granted(5), 0, 1),
			op(1, linRelease, "b", linOutput{ok: true}, 2, 3),
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := porcupine.CheckOperations(linModel, tc.ops); got != tc.want {
				t.Errorf("linearizable = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCheckEarlyExpiry(t *testing.T) {
	ttl := time.Second
	g := func(owner string, tok uint64, call, ret, released time.Duration) grant {
		if released == 0 {
			released = math.MaxInt64
		}
		return grant{key: "k", owner: owner, token: tok, ttl: ttl, call: int64(call), ret: int64(ret),
			validUntil: int64(call + ttl), released: int64(released)}
	}
	tests := []struct {
		name   string
		grants []grant
		bad    int
	}{
		{"second grant after the TTL", []grant{g("a", 1, 0, 10, 0), g("b", 2, 500, int64ms(1001), 0)}, 0},
		{"second grant before the TTL", []grant{g("a", 1, 0, 10, 0), g("b", 2, 500, int64ms(999), 0)}, 1},
		{"released first", []grant{g("a", 1, 0, 10, 20), g("b", 2, 30, 40, 0)}, 0},
		{"released after the second grant", []grant{g("a", 1, 0, 10, int64ms(800)), g("b", 2, 30, int64ms(700), 0)}, 1},
		{"same owner renews", []grant{g("a", 1, 0, 10, 0), g("a", 1, 20, 30, 0)}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := len(checkEarlyExpiry(tc.grants).violations); got != tc.bad {
				t.Errorf("%d violations, want %d", got, tc.bad)
			}
		})
	}
}

// int64ms returns d milliseconds as a Duration (a readable literal above).
func int64ms(d int64) time.Duration { return time.Duration(d) * time.Millisecond }

func TestCheckTokens(t *testing.T) {
	g := func(key, owner string, tok uint64, call, ret int64) grant {
		return grant{key: key, owner: owner, token: tok, call: call, ret: ret}
	}
	tests := []struct {
		name   string
		grants []grant
		bad    int
	}{
		{"increasing across keys", []grant{g("a", "o1", 3, 0, 1), g("b", "o2", 4, 2, 3), g("a", "o3", 9, 4, 5)}, 0},
		{"concurrent grants in any order", []grant{g("a", "o1", 9, 0, 10), g("b", "o2", 4, 1, 11)}, 0},
		{"a later grant with a smaller token", []grant{g("a", "o1", 9, 0, 1), g("b", "o2", 4, 2, 3)}, 1},
		{"one token, two owners", []grant{g("a", "o1", 5, 0, 1), g("b", "o2", 5, 0, 1)}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := len(checkTokens(tc.grants, nil).violations); got != tc.bad {
				t.Errorf("%d violations, want %d: %v", got, tc.bad, checkTokens(tc.grants, nil).violations)
			}
		})
	}
}

func TestFencedCheck(t *testing.T) {
	w := newFencedWorkload(&grantLog{})
	mustWrite := func(tok uint64, id string, list []string) {
		if err := w.store.write("r", tok, id, list); err != nil {
			t.Fatalf("write %s with token %d: %v", id, tok, err)
		}
		w.ack("r", id, tok)
	}
	mustWrite(1, "a", []string{"a"})
	mustWrite(2, "b", []string{"a", "b"})
	if _, err := w.store.read("r", 1); err == nil {
		t.Fatal("the store admitted a read with a lower token")
	}
	if v := w.check().violations; len(v) != 0 {
		t.Fatalf("clean history: %v", v)
	}
	// A writer that read before b wrote, and had b's token (a duplicated
	// token), overwrites b's write: lost.
	mustWrite(2, "c", []string{"a", "c"})
	if v := w.check().violations; len(v) != 2 {
		t.Fatalf("want a lost write and an order violation, got %v", v)
	}
}

func TestPartitionMatrices(t *testing.T) {
	// Five nodes in a ring: each node hears exactly itself and two others.
	m := ring(5, []int{0, 1, 2, 3, 4})
	for i := range 5 {
		heard := 0
		for j := range 5 {
			if !m[i][j] {
				heard++
			}
			if m[i][j] != m[j][i] {
				t.Errorf("ring is not symmetric at %d,%d", i, j)
			}
		}
		if heard != 3 {
			t.Errorf("node %d hears %d nodes (itself included), want 3", i, heard)
		}
	}
	// Three nodes: a bridge, ends cut from each other only.
	m = ring(3, []int{2, 0, 1})
	if !m[2][1] || !m[1][2] || m[0][1] || m[0][2] || m[2][0] {
		t.Errorf("bridge with 0 in the middle: %v", m)
	}
	m = cut(3, []int{1})
	if !m[1][0] || !m[0][1] || !m[1][2] || m[0][2] {
		t.Errorf("isolating node 1: %v", m)
	}
}

// TestLinCheckUnknownAfterEveryAnswer: when every node stops at once (a
// signal to all of them), the last operations have unknown outcomes and
// were called after the last answered one returned. Each must still end
// after its own call: the run of /tmp/fencer-chaos-5n-3122779747 ended so
// (a release sent as n1 shut down, 3 ms after the last answer) and
// porcupine called it not linearizable. The same tail after two holders
// must still be a violation.
func TestLinCheckUnknownAfterEveryAnswer(t *testing.T) {
	op := func(client int, kind linKind, owner string, out linOutput, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: linInput{kind, "k", owner}, Output: out, Call: call, Return: ret}
	}
	unknown := linOutput{unknown: true}
	tests := []struct {
		name string
		ops  []porcupine.Operation
		bad  int
	}{
		{"unknown release and its retry after the last answer", []porcupine.Operation{
			op(0, linAcquire, "a", linOutput{ok: true, token: 5}, 0, 10),
			op(1, linAcquire, "b", linOutput{}, 8, 11),
			op(0, linRelease, "a", unknown, 14, math.MaxInt64),
			op(0, linRelease, "a", unknown, 220, math.MaxInt64),
		}, 0},
		{"unknown acquire and release after the last answer", []porcupine.Operation{
			op(0, linAcquire, "a", linOutput{ok: true, token: 5}, 0, 10),
			op(0, linRelease, "a", linOutput{ok: true}, 11, 12),
			op(1, linAcquire, "b", unknown, 40, math.MaxInt64),
			op(1, linRelease, "b", unknown, 41, math.MaxInt64),
		}, 0},
		{"two holders, then unknown operations after the last answer", []porcupine.Operation{
			op(0, linAcquire, "a", linOutput{ok: true, token: 5}, 0, 10),
			op(1, linAcquire, "b", linOutput{ok: true, token: 7}, 11, 12),
			op(1, linRelease, "b", unknown, 20, math.MaxInt64),
			op(0, linRelease, "a", unknown, 21, math.MaxInt64),
		}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := &linWorkload{ops: tc.ops}
			res := w.check(t.TempDir())
			if res.undecided != "" || len(res.violations) != tc.bad {
				t.Errorf("%d violations (%v), undecided %q; want %d", len(res.violations), res.violations, res.undecided, tc.bad)
			}
		})
	}
}

// TestCheckStateHashes: different states at one index are a violation, and
// so are nodes that answered but stayed at different indexes; a node that
// could not be read leaves the check undecided (the run still fails), not
// a violation. In /tmp/fencer-chaos-5n-3122779747 every fencerd was sent
// SIGTERM from outside the test, and the check reported "applied indexes
// did not converge" over five unread nodes as a difference of state.
func TestCheckStateHashes(t *testing.T) {
	a, b := stateHash{index: 7, hash: "aa"}, stateHash{index: 7, hash: "bb"}
	tests := []struct {
		name      string
		hs        []stateHash
		err       error
		bad       int
		undecided bool
	}{
		{"same state", []stateHash{a, a, a}, nil, 0, false},
		{"same index, different state", []stateHash{a, b, a}, nil, 1, false},
		{"every node answered, indexes apart", []stateHash{a, {index: 5, hash: "cc"}, a},
			errors.New("applied indexes did not converge within 1m0s: [...]"), 1, false},
		{"nodes down", make([]stateHash, 5),
			&unreadableError{within: time.Minute, nodes: []string{"n1: dial tcp 10.77.0.11:7379: connect: connection refused"}}, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := checkStateHashes(tc.hs, tc.err)
			if len(res.violations) != tc.bad || (res.undecided != "") != tc.undecided {
				t.Errorf("violations %v, undecided %q; want %d violations, undecided %v", res.violations, res.undecided, tc.bad, tc.undecided)
			}
		})
	}
}

// TestUnexpectedExitIsReported runs real processes as a node's: an exit the
// harness caused (kill, stop) is not reported, one it did not (a SIGTERM
// from outside, as a `pkill fencerd` elsewhere on the machine sends, or a
// process that ends by itself) is, with the end of its log.
func TestUnexpectedExitIsReported(t *testing.T) {
	// run starts args as n's process, its log beginning with logged.
	run := func(t *testing.T, n *node, logged string, args ...string) *process {
		t.Helper()
		log, err := os.OpenFile(filepath.Join(t.TempDir(), "fencerd-1.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer log.Close()
		fmt.Fprintln(log, logged)
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		p := &process{cmd: cmd, exited: make(chan struct{})}
		n.watch(p)
		n.mu.Lock()
		n.proc = p
		n.mu.Unlock()
		return p
	}
	await := func(t *testing.T, p *process) {
		t.Helper()
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			t.Fatal("the process did not exit")
		}
	}
	t.Run("killed by the harness", func(t *testing.T) {
		n := &node{id: "n1"}
		p := run(t, n, "", "sleep", "30")
		if err := n.kill(); err != nil {
			t.Fatal(err)
		}
		await(t, p)
		if e := n.unexpectedExits(); len(e) != 0 {
			t.Errorf("reported: %v", e)
		}
	})
	t.Run("stopped at teardown", func(t *testing.T) {
		n := &node{id: "n1"}
		p := run(t, n, "", "sleep", "30")
		n.stop()
		await(t, p)
		if e := n.unexpectedExits(); len(e) != 0 {
			t.Errorf("reported: %v", e)
		}
	})
	t.Run("SIGTERM from outside", func(t *testing.T) {
		n := &node{id: "n2"}
		p := run(t, n, `level=INFO msg="shutting down"`, "sleep", "30")
		if err := syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		await(t, p)
		e := n.unexpectedExits()
		if len(e) != 1 || !strings.Contains(e[0], "n2 (pid") || !strings.Contains(e[0], "signal: terminated") ||
			!strings.Contains(e[0], `sent SIGTERM or SIGINT from outside the test (its log: level=INFO msg="shutting down")`) {
			t.Errorf("reported %q, want one exit of n2 by SIGTERM with its log's last line", e)
		}
	})
	t.Run("ends by itself", func(t *testing.T) {
		n := &node{id: "n3"}
		await(t, run(t, n, "level=INFO msg=started", "sh", "-c", `echo 'level=ERROR msg="RESP server stopped"'; exit 1`))
		if e := n.unexpectedExits(); len(e) != 1 || !strings.Contains(e[0], "exit status 1") ||
			!strings.Contains(e[0], `its log ends: level=ERROR msg="RESP server stopped"`) {
			t.Errorf("reported %q, want one exit of n3 with status 1", e)
		}
	})
}
