//go:build linux

package chaos

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fencerlock/fencer/internal/lazyfs"
)

const (
	// readyTimeout bounds how long a starting fencerd may take to answer
	// PING.
	readyTimeout = 20 * time.Second
	// exitTimeout bounds how long a killed process may take to be reaped.
	exitTimeout = 10 * time.Second
)

// node is one fencerd of a cluster: its namespace, flags and data
// directory, which outlive the process so that it can be restarted.
type node struct {
	idx     int    // 0-based
	id      string // Raft ID, "n1"...
	ns      string
	ip      string
	dir     string // logs and data
	dataDir string
	bin     string
	env     []string
	nw      *network
	disk    *lazyfs.FS // dataDir's file system, if lazyfs

	mu     sync.Mutex
	args   []string
	starts int
	proc   *process
	paused bool
	logs   []string // every log file this node wrote
	// exits are the exits of its processes that the harness did not
	// cause (see watch).
	exits []string
}

// process is one run of fencerd.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once Wait returned
	// stopping is set before the harness signals the process to end (kill,
	// stop): any other exit is unexpected.
	stopping atomic.Bool
}

func (p *process) done() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// addr is the node's RESP address.
func (n *node) addr() string { return net.JoinHostPort(n.ip, clientPort) }

// running reports whether a process is up (paused counts as up).
func (n *node) running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.proc != nil && !n.proc.done()
}

// isPaused reports whether the process is stopped by SIGSTOP.
func (n *node) isPaused() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.paused
}

// start runs fencerd in the node's namespace with its flags and waits until
// it answers PING.
func (n *node) start() error {
	n.mu.Lock()
	if n.proc != nil && !n.proc.done() {
		n.mu.Unlock()
		return fmt.Errorf("node %s is already running", n.id)
	}
	n.starts++
	logPath := filepath.Join(n.dir, "fencerd-"+strconv.Itoa(n.starts)+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		n.mu.Unlock()
		return err
	}
	cmd := exec.Command("ip", append([]string{"netns", "exec", n.ns, n.bin}, n.args...)...)
	cmd.Env = append(os.Environ(), n.env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// ip netns exec execs fencerd in place, so the pid is fencerd's; it is
	// killed if this test process dies before its cleanup ran.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err = startCmd(cmd)
	logFile.Close()
	if err != nil {
		n.mu.Unlock()
		return fmt.Errorf("starting %s: %w", n.id, err)
	}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	n.watch(p)
	n.proc, n.paused = p, false
	n.logs = append(n.logs, logPath)
	n.mu.Unlock()
	return n.waitPing(p)
}

// watch waits for p to exit, and records the exit unless the harness
// caused it. fencerd ends only on SIGINT or SIGTERM, which the harness never
// sends during a run, or when it fails: an exit the harness did not cause is
// a signal from outside the test (another process on the machine) or a
// fault of fencerd, and either leaves the run without a node it counts on.
func (n *node) watch(p *process) {
	go func() {
		_ = p.cmd.Wait()
		if !p.stopping.Load() {
			n.mu.Lock()
			n.exits = append(n.exits, fmt.Sprintf("%s (pid %d) exited at %s without the harness stopping it: %v; %s",
				n.id, p.cmd.Process.Pid, time.Now().UTC().Format("15:04:05.000"), p.cmd.ProcessState, exitCause(n.lastLogOf(p))))
			n.mu.Unlock()
		}
		close(p.exited)
	}()
}

// exitCause says what a log's tail tells of why fencerd ended: the line of
// its signal handler if there is one, else its last line.
func exitCause(log string) string {
	lines := strings.Split(strings.TrimSpace(log), "\n")
	for _, l := range lines {
		if strings.HasSuffix(l, `msg="shutting down"`) {
			return "it was sent SIGTERM or SIGINT from outside the test (its log: " + l + ")"
		}
	}
	return "its log ends: " + lines[len(lines)-1]
}

// unexpectedExits returns what watch recorded.
func (n *node) unexpectedExits() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.exits...)
}

// waitPing waits until the RESP listener answers PING.
func (n *node) waitPing(p *process) error {
	deadline := time.Now().Add(readyTimeout)
	for {
		if p.done() {
			return fmt.Errorf("%s exited before answering PING: %v; log: %s", n.id, p.cmd.ProcessState, n.lastLog())
		}
		c := respConn{dial: func() (net.Conn, error) { return n.nw.dial(n.addr(), time.Second) }}
		v, _, err := c.do(2*time.Second, "PING")
		c.close()
		if err == nil && v == "PONG" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer PING within %v (last: %v %v)", n.id, readyTimeout, v, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// signal sends sig to the running process.
func (n *node) signal(sig syscall.Signal) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc == nil || n.proc.done() {
		return fmt.Errorf("%s is not running", n.id)
	}
	if err := n.proc.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("%s: %v: %w", n.id, sig, err)
	}
	switch sig {
	case syscall.SIGSTOP:
		n.paused = true
	case syscall.SIGCONT:
		n.paused = false
	}
	return nil
}

// kill sends SIGKILL (a stopped process dies too) and waits for the exit.
func (n *node) kill() error {
	n.mu.Lock()
	p := n.proc
	n.mu.Unlock()
	if p == nil || p.done() {
		return nil
	}
	p.stopping.Store(true)
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-p.exited:
	case <-time.After(exitTimeout):
		return fmt.Errorf("%s (pid %d) did not exit within %v of SIGKILL", n.id, p.cmd.Process.Pid, exitTimeout)
	}
	n.mu.Lock()
	n.paused = false
	n.mu.Unlock()
	return nil
}

// stop ends the process for good at teardown: SIGCONT in case it is
// paused, SIGTERM, and SIGKILL if it has not exited within a few seconds.
func (n *node) stop() {
	n.mu.Lock()
	p := n.proc
	n.mu.Unlock()
	if p == nil || p.done() {
		return
	}
	p.stopping.Store(true)
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
		_ = n.kill()
	}
}

// wipe deletes the node's data directory; the process must be down.
func (n *node) wipe() error {
	if n.running() {
		return fmt.Errorf("%s: wipe while running", n.id)
	}
	if n.disk != nil {
		return n.disk.Wipe()
	}
	return os.RemoveAll(n.dataDir)
}

// powerCut kills the process and drops what its file system had not made
// durable, as a power cut would; the process restarts on what is left.
func (n *node) powerCut() (lazyfs.Report, error) {
	if n.disk == nil {
		return lazyfs.Report{}, fmt.Errorf("%s: no lazyfs to cut the power of", n.id)
	}
	if err := n.kill(); err != nil {
		return lazyfs.Report{}, err
	}
	return n.disk.PowerCut()
}

// setJoin makes later starts join through addrs (a wiped node needs it;
// with state on disk fencerd ignores it).
func (n *node) setJoin(addrs []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for i, a := range n.args {
		if a == "--join" && i+1 < len(n.args) {
			n.args = append(n.args[:i], n.args[i+2:]...)
			break
		}
	}
	n.args = append(n.args, "--join", strings.Join(addrs, ","))
}

// lastLog returns the tail of the latest log file.
func (n *node) lastLog() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.logs) == 0 {
		return ""
	}
	return tail(n.logs[len(n.logs)-1])
}

// lastLogOf returns the tail of p's log file: its command's stdout.
func (n *node) lastLogOf(p *process) string {
	if f, ok := p.cmd.Stdout.(*os.File); ok {
		return tail(f.Name())
	}
	return ""
}

// tail returns the last 4000 bytes of the file at path.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// badLogLines returns, per log file, the first line that shows a panic, a
// fatal runtime error or a data race.
func (n *node) badLogLines() []string {
	n.mu.Lock()
	logs := append([]string(nil), n.logs...)
	n.mu.Unlock()
	var out []string
	for _, path := range logs {
		b, err := os.ReadFile(path)
		if err != nil {
			out = append(out, fmt.Sprintf("%s: %v", path, err))
			continue
		}
		for _, bad := range []string{"panic:", "fatal error:", "DATA RACE"} {
			if i := bytes.Index(b, []byte(bad)); i >= 0 {
				end := bytes.IndexByte(b[i:], '\n')
				if end < 0 {
					end = len(b) - i
				}
				out = append(out, fmt.Sprintf("%s: %s", path, b[i:i+end]))
			}
		}
	}
	return out
}

// countInLogs counts the lines of all log files that contain s.
func (n *node) countInLogs(s string) int {
	n.mu.Lock()
	logs := append([]string(nil), n.logs...)
	n.mu.Unlock()
	total := 0
	for _, path := range logs {
		if b, err := os.ReadFile(path); err == nil {
			total += bytes.Count(b, []byte(s))
		}
	}
	return total
}
