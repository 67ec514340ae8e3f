package integration

// fencer lock and fencer elect stop their command before the lock can pass
// to another holder even when they die without warning (SIGKILL, the OOM
// killer): the command, and what it started, are gone before the lease's
// validity ends, and so before the next holder's command starts.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// The supervisor is killed with SIGKILL while its command, and a child of
// the command, both deaf to SIGTERM, write to a log. A second fencer waits
// for the same lock (or campaigns in the same election). The last renewal
// was sent before the kill, so the validity ends within a TTL of it: both
// processes must be gone by then, and neither writes after the next
// holder's first write.
func TestCLILockSuperviseSupervisorKilled(t *testing.T) { svSupervisorKilled(t, "lock", false) }

// The same for fencer elect: the next leader is elected once the first's
// session expires.
func TestCLIElectSuperviseSupervisorKilled(t *testing.T) { svSupervisorKilled(t, "elect", false) }

// The same when fencer's whole process group is killed, as kill -9 %1 in
// the shell that started it does.
func TestCLILockSuperviseSupervisorGroupKilled(t *testing.T) { svSupervisorKilled(t, "lock", true) }

// svSupervisorKilled SIGKILLs fencer verb, or its whole process group if
// group is set.
func svSupervisorKilled(t *testing.T, verb string, group bool) {
	d := startFencerd(t)
	bin := clFencerBin(t)
	dir := t.TempDir()
	log, ready, pgidFile := filepath.Join(dir, "log"), filepath.Join(dir, "ready"), filepath.Join(dir, "pgid")
	const ttl = 2 * time.Second
	script := fmt.Sprintf(`trap '' TERM
(while :; do echo child $(date +%%s%%N) >> %[1]s; sleep 0.01; done) &
echo $$ > %[2]s; touch %[3]s
while :; do echo first $(date +%%s%%N) >> %[1]s; sleep 0.01; done`, log, pgidFile, ready)
	// The first fencer's output goes to a file: the orphaned command of a
	// fencer without the fix holds it open, and a pipe would keep Wait
	// from returning.
	out, err := os.Create(filepath.Join(dir, "first.out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	first := exec.Command(bin, verb, "--ttl", ttl.String(), "kill9", "--", "sh", "-c", script)
	first.Env = append(os.Environ(), "FENCER_ADDR="+d.addr)
	first.Stdout, first.Stderr = out, out
	first.SysProcAttr = &syscall.SysProcAttr{Setpgid: group}
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = first.Process.Kill() })
	clAwaitFile(t, ready, requestTimeout)
	pgid := svReadInt(t, pgidFile)
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	if n := len(svGroup(pgid)); n < 2 {
		t.Fatalf("the command's group %d has %d processes; want the command and its child", pgid, n)
	}
	second := svStart(t, bin, d.addr, nil, verb, "--ttl", ttl.String(), "--wait", "20s", "kill9", "--",
		"sh", "-c", `echo second $(date +%s%N) >> `+log)
	victim := first.Process.Pid
	if group {
		victim = -victim
	}
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	_ = first.Wait()
	if code := second.wait(t, ttl+10*time.Second); code != 0 {
		t.Fatalf("second fencer: exit %d, stderr %q", code, second.errOut)
	}
	// A process of the first command that still runs writes meanwhile.
	time.Sleep(200 * time.Millisecond)
	next := svStamps(t, log, "second")[0]
	for _, word := range []string{"first", "child"} {
		stamps := svStamps(t, log, word)
		last := stamps[len(stamps)-1]
		t.Logf("the %s process's last write came %v after fencer was killed, %v before the next holder's first (TTL %v)",
			word, last.Sub(killed).Round(time.Millisecond), next.Sub(last).Round(time.Millisecond), ttl)
		if !last.Before(next) {
			t.Errorf("the %s process wrote %v after the next holder's first write", word, last.Sub(next))
		}
		if !last.Before(killed.Add(ttl)) {
			t.Errorf("the %s process wrote %v after fencer was killed, beyond the lease's validity (%v)", word, last.Sub(killed), ttl)
		}
	}
	if left := svGroup(pgid); len(left) != 0 {
		t.Fatalf("processes of the first command's group %d still run after the next holder's command: %v", pgid, left)
	}
}

// A supervisor that is stopped (SIGSTOP) cannot renew, nor stop its
// command: the command, deaf to SIGTERM, is killed by the end of the
// validity all the same, and fencer, continued, exits with its status.
func TestCLILockSuperviseSupervisorStopped(t *testing.T) {
	d := startFencerd(t)
	bin := clFencerBin(t)
	dir := t.TempDir()
	log, ready := filepath.Join(dir, "log"), filepath.Join(dir, "ready")
	const ttl = 2 * time.Second
	r := svStart(t, bin, d.addr, nil, "lock", "--ttl", ttl.String(), "stopped", "--", "sh", "-c", svTicker("tick", log, ready))
	r.awaitReady(t, ready)
	if err := r.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	time.Sleep(ttl + 500*time.Millisecond)
	ticks := svStamps(t, log, "tick")
	last := ticks[len(ticks)-1]
	t.Logf("last write %v after fencer was stopped (TTL %v)", last.Sub(stopped).Round(time.Millisecond), ttl)
	if err := r.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if code := r.wait(t, 5*time.Second); code != 137 {
		t.Fatalf("exit %d, stderr %q; want 137 (SIGKILL)", code, r.errOut)
	}
	if !last.Before(stopped.Add(ttl)) {
		t.Fatalf("the command wrote %v after fencer was stopped, beyond the lease's validity (%v)", last.Sub(stopped), ttl)
	}
}
