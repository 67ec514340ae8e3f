package integration

// fencer lock stops its command before the lock can pass to another
// holder. Consul's `consul lock` is the anchor and its bug reports are the
// list: a child killed long after the lock was lost (hashicorp/consul#9788),
// a grandchild left running (#2022), signals not passed on (#797, #1210).
// Each test runs the built fencer against a real fencerd, with short TTLs.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// svRun is a fencer process started by svStart.
type svRun struct {
	cmd         *exec.Cmd
	out, errOut *svBuffer
	done        chan struct{}
}

// svStart starts the fencer binary with FENCER_ADDR=addr, killed at the end
// of the test if it still runs.
func svStart(t *testing.T, bin, addr string, env []string, args ...string) *svRun {
	t.Helper()
	r := &svRun{cmd: exec.Command(bin, args...), out: &svBuffer{}, errOut: &svBuffer{}, done: make(chan struct{})}
	r.cmd.Env = append(append(os.Environ(), "FENCER_ADDR="+addr), env...)
	r.cmd.Stdout, r.cmd.Stderr = r.out, r.errOut
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = r.cmd.Wait()
		close(r.done)
	}()
	t.Cleanup(func() {
		_ = r.cmd.Process.Kill()
		<-r.done
	})
	return r
}

// wait waits up to within for fencer to exit and returns its exit code.
func (r *svRun) wait(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-r.done:
		return r.cmd.ProcessState.ExitCode()
	case <-time.After(within):
		t.Fatalf("fencer %s still runs after %v; stderr %q", strings.Join(r.cmd.Args[1:], " "), within, r.errOut)
		return -1
	}
}

// awaitReady waits until the command has touched ready, failing at once
// with fencer's stderr if fencer exits first.
func (r *svRun) awaitReady(t *testing.T, ready string) {
	t.Helper()
	deadline := time.Now().Add(requestTimeout)
	for {
		if _, err := os.Stat(ready); err == nil {
			return
		}
		select {
		case <-r.done:
			t.Fatalf("fencer exited %d before its command was ready; stderr %q", r.cmd.ProcessState.ExitCode(), r.errOut)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the command was not ready within %v; fencer's stderr %q", requestTimeout, r.errOut)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// svBuffer is a bytes.Buffer safe for a copier and the test at once.
type svBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *svBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *svBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// svTicker is a shell script that writes "<word> <unix ns>" lines to log
// until it is killed, ignoring SIGTERM (so that only the SIGKILL by the end
// of the validity stops it), after touching ready.
func svTicker(word, log, ready string) string {
	return fmt.Sprintf(`trap '' TERM; touch %s; while :; do echo %s $(date +%%s%%N) >> %s; sleep 0.01; done`, ready, word, log)
}

// svStamps reads the times of the lines of path that start with word.
func svStamps(t *testing.T, path, word string) []time.Time {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ts []time.Time
	for _, line := range strings.Split(string(b), "\n") {
		w, ns, _ := strings.Cut(line, " ")
		if n, err := strconv.ParseInt(ns, 10, 64); w == word && err == nil {
			ts = append(ts, time.Unix(0, n))
		}
	}
	if len(ts) == 0 {
		t.Fatalf("%s has no %q line:\n%s", filepath.Base(path), word, b)
	}
	return ts
}

// svRevoke force-frees name, as an operator would with redis-cli.
func svRevoke(t *testing.T, d *daemon, name string) {
	t.Helper()
	if out := cli(t, d, "FENCE.REVOKE", name); len(out) != 1 || out[0] != "1" {
		t.Fatalf("FENCE.REVOKE %s: %q", name, out)
	}
}

// hashicorp/consul#9788: the lock is revoked while the command runs. The
// command, deaf to SIGTERM, is killed at the latest when the validity it
// had at the revoke ends, and fencer says why.
func TestCLILockSupervise9788Revoked(t *testing.T) {
	d := startFencerd(t)
	bin := clFencerBin(t)
	dir := t.TempDir()
	log, ready := filepath.Join(dir, "log"), filepath.Join(dir, "ready")
	const ttl = 2 * time.Second
	r := svStart(t, bin, d.addr, nil, "lock", "--ttl", ttl.String(), "rev", "--", "sh", "-c", svTicker("tick", log, ready))
	r.awaitReady(t, ready)
	svRevoke(t, d, "rev")
	revoked := time.Now()
	code := r.wait(t, ttl+5*time.Second)
	ticks := svStamps(t, log, "tick")
	last := ticks[len(ticks)-1]
	t.Logf("last write %v after the revoke (TTL %v)", last.Sub(revoked).Round(time.Millisecond), ttl)
	if code != 137 || !strings.Contains(r.errOut.String(), `lost the lock "rev"`) {
		t.Fatalf("exit %d, stderr %q; want 137 (SIGKILL) and the lost lock", code, r.errOut)
	}
	if !last.Before(revoked.Add(ttl)) {
		t.Fatalf("the command wrote %v after the revoke, beyond the lease's validity (%v)", last.Sub(revoked), ttl)
	}
}

// hashicorp/consul#9788 again: the only node stops (SIGSTOP), so no renewal
// succeeds. The last renewal was sent before the stop, so the validity ends
// within a TTL of it; the command, deaf to SIGTERM, is dead by then.
func TestCLILockSupervise9788CutOff(t *testing.T) {
	d := startFencerd(t)
	bin := clFencerBin(t)
	dir := t.TempDir()
	log, ready := filepath.Join(dir, "log"), filepath.Join(dir, "ready")
	const ttl = 2 * time.Second
	r := svStart(t, bin, d.addr, nil, "lock", "--ttl", ttl.String(), "cutoff", "--", "sh", "-c", svTicker("tick", log, ready))
	r.awaitReady(t, ready)
	d.clStop(t)
	cut := time.Now()
	code := r.wait(t, ttl+5*time.Second)
	ticks := svStamps(t, log, "tick")
	last := ticks[len(ticks)-1]
	t.Logf("last write %v after the node stopped (TTL %v)", last.Sub(cut).Round(time.Millisecond), ttl)
	if code != 137 || !strings.Contains(r.errOut.String(), `could not renew the lock "cutoff"`) {
		t.Fatalf("exit %d, stderr %q; want 137 (SIGKILL) and why", code, r.errOut)
	}
	if !last.Before(cut.Add(ttl)) {
		t.Fatalf("the command wrote %v after the node stopped, beyond the lease's validity (%v)", last.Sub(cut), ttl)
	}
}

// The command's last write comes before the next holder's first. The first
// fencer reaches the node through a proxy that the test cuts: its lease can
// no longer be renewed, the server frees the lock after the TTL and grants
// it to the second fencer, waiting meanwhile. The first command ignores
// SIGTERM, so only the SIGKILL by the end of the validity stops it.
func TestCLILockSuperviseStopsBeforeNextHolder(t *testing.T) {
	d := startFencerd(t)
	bin := clFencerBin(t)
	dir := t.TempDir()
	log, ready := filepath.Join(dir, "log"), filepath.Join(dir, "ready")
	p := svProxy(t, d.addr)
	const ttl = 2 * time.Second
	first := svStart(t, bin, p.addr(), nil, "lock", "--ttl", ttl.String(), "next", "--", "sh", "-c", svTicker("first", log, ready))
	first.awaitReady(t, ready)
	p.cut()
	second := svStart(t, bin, d.addr, nil, "lock", "--ttl", ttl.String(), "--wait", "20s", "next", "--",
		"sh", "-c", `echo second $(date +%s%N) >> `+log)
	if code := first.wait(t, ttl+5*time.Second); code != 137 {
		t.Fatalf("first fencer: exit %d, stderr %q; want 137", code, first.errOut)
	}
	if code := second.wait(t, ttl+10*time.Second); code != 0 {
		t.Fatalf("second fencer: exit %d, stderr %q", code, second.errOut)
	}
	firsts, seconds := svStamps(t, log, "first"), svStamps(t, log, "second")
	last, next := firsts[len(firsts)-1], seconds[0]
	t.Logf("the next holder's first write came %v after the last write of the first", next.Sub(last))
	if !last.Before(next) {
		t.Fatalf("the first command wrote %v after the next holder's first write", last.Sub(next))
	}
}

// hashicorp/consul#2022: the command starts a grandchild that ignores
// SIGTERM. When the lock is lost, the whole group is stopped: no process of
// it is left. And when the command exits by itself, what it left running is
// killed before the lock is released.
func TestCLILockSupervise2022Grandchild(t *testing.T) {
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
			r := svStart(t, bin, d.addr, nil, "lock", "--ttl", "2s", "gc-"+c.name, "--", "sh", "-c", script)
			r.awaitReady(t, ready)
			pgid := svReadInt(t, pgidFile)
			t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
			if n := len(svGroup(pgid)); n < 2 {
				t.Fatalf("the command's group %d has %d processes; want the command and its child", pgid, n)
			}
			if c.name == "revoked" {
				svRevoke(t, d, "gc-"+c.name)
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
// which handles them and goes on; fencer exits with the command's status
// once it exits, and then releases the lock.
func TestCLILockSupervise797Signals(t *testing.T) {
	d := startFencerd(t)
	bin := clFencerBin(t)
	dir := t.TempDir()
	log, ready := filepath.Join(dir, "log"), filepath.Join(dir, "ready")
	// (sh's own reports of its sleeps killed by the signals go to
	// /dev/null.)
	script := `exec 2>/dev/null; for s in USR1 USR2 HUP INT QUIT; do trap "echo $s >> ` + log + `" $s; done
trap 'echo TERM >> ` + log + `; exit 7' TERM
touch ` + ready + `; while :; do sleep 0.02; done`
	r := svStart(t, bin, d.addr, nil, "lock", "--ttl", "2s", "sig", "--", "sh", "-c", script)
	r.awaitReady(t, ready)
	for i, sig := range []syscall.Signal{syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT} {
		if err := r.cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		svAwaitLines(t, log, i+1)
	}
	if out, _, _ := clFencer(t, bin, d, nil, "status", "sig"); !strings.HasPrefix(out, "owner=") {
		t.Fatalf("after the signals the lock is %q, want still held", out)
	}
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code := r.wait(t, 10*time.Second)
	b, _ := os.ReadFile(log)
	if code != 7 || r.errOut.String() != "" || string(b) != "USR1\nUSR2\nHUP\nINT\nQUIT\nTERM\n" {
		t.Fatalf("exit %d, stderr %q, the command saw %q; want 7, nothing, and every signal", code, r.errOut, b)
	}
	if out, _, _ := clFencer(t, bin, d, nil, "status", "sig"); out != "free\n" {
		t.Fatalf("after fencer exited the lock is %q, want free", out)
	}
}

// On a terminal the command's group is the terminal's foreground (it gets
// Ctrl-C directly) and still a group of its own, so that a lost lock stops
// its grandchild too (hashicorp/consul#2022). fencer runs as a job of an
// interactive shell would: bash -m gives it a process group of its own and
// the terminal, so fencer, in the background while the command runs, would
// be stopped by SIGTTOU when it takes the terminal back if it did not
// ignore it.
func TestCLILockSupervise2022Terminal(t *testing.T) {
	d := startFencerd(t)
	bin := clFencerBin(t)
	dir := t.TempDir()
	ready, pgidFile, codeFile := filepath.Join(dir, "ready"), filepath.Join(dir, "pgid"), filepath.Join(dir, "code")
	master, slave := svOpenPTY(t)
	script := fmt.Sprintf(`sh -c 'trap "" TERM; exec sleep 1000' & echo $$ > %s; touch %s; while :; do sleep 0.05; done`, pgidFile, ready)
	job := exec.Command("bash", "-m", "-c", `"$FENCER" lock --ttl 2s tty -- sh -c "$SCRIPT"; echo $? > "$CODE"`)
	job.Env = append(os.Environ(), "FENCER_ADDR="+d.addr, "FENCER="+bin, "SCRIPT="+script, "CODE="+codeFile)
	// bash leads a session whose controlling terminal is the pty, as a
	// login shell does (it needs the terminal on standard error too, for
	// job control).
	job.Stdin, job.Stdout, job.Stderr = slave, slave, slave
	job.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := job.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		_ = job.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-job.Process.Pid, syscall.SIGKILL)
		<-done
		master.Close()
		slave.Close()
	})
	var out svBuffer
	go func() { _, _ = io.Copy(&out, master) }()
	clAwaitFile(t, ready, requestTimeout)
	pgid := svReadInt(t, pgidFile)
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	// The command's parent is fencer's shim, in fencer's process group.
	shimPid := svParent(t, pgid)
	fencerPid := svParent(t, shimPid)
	t.Cleanup(func() {
		if t.Failed() { // stopped, say
			_ = syscall.Kill(fencerPid, syscall.SIGKILL)
			_ = syscall.Kill(shimPid, syscall.SIGKILL)
		}
	})
	if fg := svForeground(t, master); pgid == fencerPid || pgid == shimPid || pgid == job.Process.Pid || fg != pgid {
		t.Fatalf("the command's group %d (fencer %d, its shim %d, bash %d), the terminal's foreground %d; want the command's own group in the foreground",
			pgid, fencerPid, shimPid, job.Process.Pid, fg)
	}
	svRevoke(t, d, "tty")
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("bash still runs 10s after the revoke; its output %q", out.String())
	}
	if code := svReadInt(t, codeFile); code != 143 {
		t.Fatalf("fencer exited %d, want 143; output %q", code, out.String())
	}
	svAwaitGroupGone(t, pgid)
}

// svParent returns the parent of pid.
func svParent(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatal(err)
	}
	return ppid
}

// svOpenPTY opens a new pseudo-terminal pair.
func svOpenPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("opening a pseudo-terminal: %v (is /dev/pts mounted?)", err)
	}
	var unlock int32
	var n uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, master.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		t.Fatalf("unlocking the pseudo-terminal: %v", e)
	}
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, master.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		t.Fatalf("naming the pseudo-terminal: %v", e)
	}
	slave, err = os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return master, slave
}

// svForeground returns the foreground process group of the terminal whose
// master side is master.
func svForeground(t *testing.T, master *os.File) int {
	t.Helper()
	var pgrp int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, master.Fd(), syscall.TIOCGPGRP, uintptr(unsafe.Pointer(&pgrp))); e != 0 {
		t.Fatalf("TIOCGPGRP: %v", e)
	}
	return int(pgrp)
}

// svReadInt reads a number the command wrote to path.
func svReadInt(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// svGroup returns the processes of process group pgid that have not exited
// (zombies, dead but not yet reaped, are left out), as "pid state".
func svGroup(pgid int) []string {
	entries, _ := os.ReadDir("/proc")
	var in []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// After the parenthesized name: state, ppid, pgrp.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) >= 3 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" {
			in = append(in, fmt.Sprintf("%d %s", pid, f[0]))
		}
	}
	return in
}

// svAwaitGroupGone waits a little for the last processes of group pgid,
// killed, to be gone.
func svAwaitGroupGone(t *testing.T, pgid int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		left := svGroup(pgid)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes of the command's group %d still run: %v", pgid, left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// svAwaitLines waits until path has n lines.
func svAwaitLines(t *testing.T, path string, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		if strings.Count(string(b), "\n") >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has %q, want %d lines", filepath.Base(path), b, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// svTCPProxy passes connections on to a fencerd until cut, when it stops
// listening and closes every connection: its clients can no longer reach
// the node, while others still can.
type svTCPProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	closed bool
}

func svProxy(t *testing.T, target string) *svTCPProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &svTCPProxy{ln: ln, target: target}
	go p.serve()
	t.Cleanup(p.cut)
	return p
}

func (p *svTCPProxy) addr() string { return p.ln.Addr().String() }

func (p *svTCPProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s, err := (&net.Dialer{}).DialContext(ctx, "tcp", p.target)
		cancel()
		if err != nil {
			c.Close()
			continue
		}
		if !p.track(c, s) {
			return
		}
		go func() { _, _ = io.Copy(s, c); s.Close() }()
		go func() { _, _ = io.Copy(c, s); c.Close() }()
	}
}

// track records c and s, or closes them if the proxy was cut.
func (p *svTCPProxy) track(c, s net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		s.Close()
		return false
	}
	p.conns = append(p.conns, c, s)
	return true
}

func (p *svTCPProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	p.ln.Close()
	for _, c := range p.conns {
		c.Close()
	}
}
