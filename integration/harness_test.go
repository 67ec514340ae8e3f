package integration

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/fencerlock/fencer/internal/redistest"
	"github.com/fencerlock/fencer/internal/testbin"
)

// The fencerd binaries built by TestMain: as shipped, and with -tags
// fencer_faults, which behaves as shipped unless FENCER_FAULTS names a fault
// to inject (server/faults_enabled.go).
var fencerdBin, faultyBin string

const (
	// readyTimeout bounds how long a starting daemon may take to answer PING.
	readyTimeout = 20 * time.Second
	// stopTimeout is how long a daemon gets to exit after SIGTERM.
	stopTimeout = 5 * time.Second
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if _, err := exec.LookPath("redis-cli"); err != nil {
		fmt.Fprintln(os.Stderr, "integration: redis-cli is not on PATH; these tests drive fencerd with the real redis-cli."+
			" Install it (Debian/Ubuntu: apt-get install redis-tools) and run them again.")
		return 1
	}
	dir, err := os.MkdirTemp("", "fencer-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if fencerdBin, faultyBin, err = testbin.BuildFencerd(dir); err != nil {
		fmt.Fprintln(os.Stderr, "integration: building fencerd:", err)
		return 1
	}
	return m.Run()
}

// daemon is one fencerd: its flags and data directory, which outlive the
// process so that it can be restarted, and the process currently running.
type daemon struct {
	dir     string // the test's temp dir: data dir and logs
	dataDir string
	addr    string // RESP address, 127.0.0.1:port
	port    string
	args    []string
	starts  int
	proc    *process
	// ready, if set, replaces the plain-TCP PING that start waits for (a
	// TLS port does not answer that).
	ready func(*daemon) error
	// bin, if set, is run instead of fencerdBin, with env added to the
	// test's environment.
	bin string
	env []string
}

// process is one run of the binary.
type process struct {
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{} // closed once Wait returned
	state   *os.ProcessState
}

// startFencerd starts fencerd on a fresh data directory and free loopback
// ports, waits until it answers PING, and stops it when the test ends.
func startFencerd(t *testing.T) *daemon {
	t.Helper()
	d := newDaemons(t, 1)[0]
	d.start(t)
	return d
}

// newDaemons returns n fencerds, not started, each with a temporary
// directory of its own for its data and logs, and with client and Raft
// ports on loopback that were all free at once.
func newDaemons(t *testing.T, n int) []*daemon {
	t.Helper()
	ports := freePorts(t, 2*n)
	ds := make([]*daemon, n)
	for i := range ds {
		ds[i] = newDaemon(t.TempDir(), ports[2*i], ports[2*i+1])
	}
	return ds
}

// newDaemon returns a fencerd, not started, with its data directory in dir,
// serving clients on 127.0.0.1:port and Raft on 127.0.0.1:raftPort.
func newDaemon(dir, port, raftPort string) *daemon {
	d := &daemon{dir: dir, dataDir: filepath.Join(dir, "data"), addr: net.JoinHostPort("127.0.0.1", port), port: port}
	d.args = []string{"--data-dir", d.dataDir, "--listen", d.addr, "--raft-listen", net.JoinHostPort("127.0.0.1", raftPort)}
	return d
}

// freePorts returns n distinct loopback ports that were free a moment ago.
// All listeners are held until every port is chosen, so none repeats.
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	var ports []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("finding a free port: %v", err)
		}
		defer ln.Close()
		_, p, _ := net.SplitHostPort(ln.Addr().String())
		ports = append(ports, p)
	}
	return ports
}

// start runs the binary with the daemon's flags and waits until it answers
// PING. The process is stopped (SIGTERM, then SIGKILL) when the test ends.
func (d *daemon) start(t *testing.T) {
	t.Helper()
	if d.proc != nil && !d.proc.done() {
		t.Fatalf("fencerd %s is already running", d.addr)
	}
	d.starts++
	logPath := filepath.Join(d.dir, "fencerd-"+strconv.Itoa(d.starts)+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	args := d.args
	if !slices.Contains(args, "--http-listen") {
		// The default, the --listen port + 2, is not among the ports
		// freePorts chose, so it could be another node's Raft port: the
		// HTTP endpoints are tested in cmd/fencerd, not here.
		args = append(slices.Clip(args), "--http-listen", "off")
	}
	bin := fencerdBin
	if d.bin != "" {
		bin = d.bin
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), d.env...)
	cmd.Dir = d.dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("starting fencerd: %v", err)
	}
	logFile.Close() // the child has its own descriptor
	p := &process{cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		p.state = cmd.ProcessState
		close(p.exited)
	}()
	d.proc = p
	t.Cleanup(func() {
		p.stop(t)
		p.checkLog(t)
		if t.Failed() {
			p.dumpLog(t)
		}
	})
	d.waitPing(t, p)
}

// restart starts the binary again with the same flags and data directory.
func (d *daemon) restart(t *testing.T) {
	t.Helper()
	d.start(t)
}

// waitPing waits until the RESP listener answers PING (which needs no
// leader: the first lock command may still wait for the election), or
// d.ready answers nil.
func (d *daemon) waitPing(t *testing.T, p *process) {
	t.Helper()
	ready := d.ready
	if ready == nil {
		ready = func(d *daemon) error { return pingOnce(d.addr) }
	}
	deadline := time.Now().Add(readyTimeout)
	for {
		if p.done() {
			p.dumpLog(t)
			t.Fatalf("fencerd exited before it was ready: %v", p.state)
		}
		err := ready(d)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			p.dumpLog(t)
			t.Fatalf("fencerd %s was not ready within %v: %v", d.addr, readyTimeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func pingOnce(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	return redistest.Ping(c)
}

// kill9 kills the running process with SIGKILL and waits for it.
func (d *daemon) kill9(t *testing.T) {
	t.Helper()
	p := d.proc
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !p.done() {
		t.Fatalf("SIGKILL: %v", err)
	}
	select {
	case <-p.exited:
	case <-time.After(stopTimeout):
		t.Fatalf("fencerd did not exit within %v of SIGKILL", stopTimeout)
	}
}

// terminate sends SIGTERM and returns the exit code and how long the process
// took to exit. It fails the test if the process is still running after
// stopTimeout (the cleanup then kills it).
func (d *daemon) terminate(t *testing.T) (code int, took time.Duration) {
	t.Helper()
	p := d.proc
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	select {
	case <-p.exited:
		return p.state.ExitCode(), time.Since(start)
	case <-time.After(stopTimeout):
		t.Fatalf("fencerd did not exit within %v of SIGTERM", stopTimeout)
		return -1, 0
	}
}

// log returns what the running (or last) process wrote so far.
func (d *daemon) log(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(d.proc.logPath)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (p *process) done() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// stop ends the process if it still runs: SIGTERM, then SIGKILL if it has
// not exited within stopTimeout. It always waits for the process.
func (p *process) stop(t *testing.T) {
	t.Helper()
	if p.done() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return
	case <-time.After(stopTimeout):
	}
	t.Errorf("fencerd (pid %d) ignored SIGTERM for %v; sending SIGKILL", p.cmd.Process.Pid, stopTimeout)
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// checkLog fails the test if the process panicked or, when built with
// -race, reported a data race.
func (p *process) checkLog(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		t.Errorf("reading %s: %v", p.logPath, err)
		return
	}
	for _, bad := range []string{"panic:", "WARNING: DATA RACE", "fatal error:"} {
		if bytes.Contains(b, []byte(bad)) {
			t.Errorf("fencerd (pid %d) wrote %q to its log", p.cmd.Process.Pid, bad)
		}
	}
}

func (p *process) dumpLog(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		t.Logf("reading %s: %v", p.logPath, err)
		return
	}
	t.Logf("fencerd output (%s, pid %d):\n%s", filepath.Base(p.logPath), p.cmd.Process.Pid, b)
}
