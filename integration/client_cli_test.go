package integration

import (
	"bytes"
	"context"
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

// clFencer runs the fencer binary against d and returns its stdout, stderr
// and exit code.
func clFencer(t *testing.T, bin string, d *daemon, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(append(os.Environ(), "FENCER_ADDR="+d.addr), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if cmd.ProcessState == nil {
		t.Fatalf("fencer %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
}

// fencer lock runs the command with the token in FENCER_TOKEN and prints
// nothing of its own: the command's output is all there is.
func TestClientCLILockPrintsToken(t *testing.T) {
	d := startFencerd(t)
	bin := clFencerBin(t)
	out, errOut, code := clFencer(t, bin, d, nil, "lock", "build-x", "--", "sh", "-c", "echo $FENCER_TOKEN")
	if code != 0 || errOut != "" {
		t.Fatalf("fencer lock: exit %d, stderr %q", code, errOut)
	}
	if !regexp.MustCompile(`^[1-9][0-9]*\n$`).MatchString(out) {
		t.Fatalf("stdout %q is not one token", out)
	}
	// The lock was released when the command ended; the next holder's
	// token is larger.
	out2, _, code := clFencer(t, bin, d, nil, "lock", "build-x", "--", "sh", "-c", "echo $FENCER_TOKEN")
	t1, _ := strconv.ParseUint(strings.TrimSpace(out), 10, 64)
	t2, _ := strconv.ParseUint(strings.TrimSpace(out2), 10, 64)
	if code != 0 || t2 <= t1 {
		t.Fatalf("second fencer lock: exit %d, token %d after %d", code, t2, t1)
	}
	if out, _, _ := clFencer(t, bin, d, nil, "status", "build-x"); out != "free\n" {
		t.Fatalf("status after the commands: %q", out)
	}
}

// Two fencer lock on the same name, started together, run their commands
// one after the other, in token order.
func TestClientCLIConcurrentLocksTakeTurns(t *testing.T) {
	d := startFencerd(t)
	bin := clFencerBin(t)
	log := filepath.Join(t.TempDir(), "turns.log")
	script := `echo "start $FENCER_TOKEN" >> "$TURNS"; sleep 1; echo "end $FENCER_TOKEN" >> "$TURNS"`
	var wg sync.WaitGroup
	codes := make([]int, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errOut, code := clFencer(t, bin, d, []string{"TURNS=" + log}, "lock", "--ttl", "5s", "turns", "--", "sh", "-c", script)
			if errOut != "" {
				t.Errorf("fencer lock %d wrote to stderr: %q", i, errOut)
			}
			codes[i] = code
		}()
	}
	wg.Wait()
	if codes[0] != 0 || codes[1] != 0 {
		t.Fatalf("exit codes %v", codes)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	lines := clLines(string(b))
	var tok [2]string
	if len(lines) == 4 {
		tok[0] = strings.TrimPrefix(lines[0], "start ")
		tok[1] = strings.TrimPrefix(lines[2], "start ")
	}
	want := []string{"start " + tok[0], "end " + tok[0], "start " + tok[1], "end " + tok[1]}
	if fmt.Sprint(lines) != fmt.Sprint(want) || tok[0] == tok[1] {
		t.Fatalf("the commands overlapped or shared a token:\n%s", b)
	}
	t0, _ := strconv.ParseUint(tok[0], 10, 64)
	t1, _ := strconv.ParseUint(tok[1], 10, 64)
	if t0 == 0 || t1 <= t0 {
		t.Fatalf("tokens %d then %d", t0, t1)
	}
}

// fencer lock stops its command when the lease is lost: here the node is
// stopped (SIGSTOP), so the lease can no longer be renewed, and the command
// gets SIGTERM within one TTL (when a third of its validity is left).
func TestClientCLILockStopsCommandWhenCutOff(t *testing.T) {
	d := startFencerd(t)
	bin := clFencerBin(t)
	dir := t.TempDir()
	started, stopped := filepath.Join(dir, "started"), filepath.Join(dir, "stopped")
	const ttl = 2 * time.Second
	type res struct {
		errOut string
		code   int
	}
	done := make(chan res, 1)
	go func() {
		script := fmt.Sprintf(`trap 'touch %s; exit 143' TERM; touch %s; while :; do sleep 0.05; done`, stopped, started)
		_, errOut, code := clFencer(t, bin, d, nil, "lock", "--ttl", ttl.String(), "cut", "--", "sh", "-c", script)
		done <- res{errOut, code}
	}()
	clAwaitFile(t, started, requestTimeout)
	d.clStop(t)
	cut := time.Now()
	clAwaitFile(t, stopped, ttl+5*time.Second)
	took := time.Since(cut)
	t.Logf("command got SIGTERM %v after SIGSTOP (TTL %v)", took.Round(time.Millisecond), ttl)
	if took > ttl+time.Second {
		t.Errorf("command stopped %v after the cut; the TTL is %v", took, ttl)
	}
	select {
	case r := <-done:
		if r.code != 143 || !strings.Contains(r.errOut, `could not renew the lock "cut"`) {
			t.Fatalf("exit %d, stderr %q; want 143 and the lease not renewed", r.code, r.errOut)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("fencer lock still runs 20s after its command was stopped")
	}
}

// clAwaitFile waits until path exists.
func clAwaitFile(t *testing.T, path string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within %v", filepath.Base(path), within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
