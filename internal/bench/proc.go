package bench

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Procs is every child process a harness started. StopAll stops them all;
// Start refuses new ones after it. Each child runs in its own process group,
// so a Ctrl-C at the terminal reaches only the harness, which then stops its
// children in order; and each gets SIGTERM if the harness dies first.
type Procs struct {
	mu     sync.Mutex
	list   []*Proc
	closed bool
}

// Proc is one child process.
type Proc struct {
	Name    string
	LogPath string
	cmd     *exec.Cmd
	exited  chan struct{}
	state   *os.ProcessState

	// Stdin and Stdout are set when the process was started with pipes.
	Stdin  io.WriteCloser
	Stdout *bufio.Reader
}

// errStopped is Start's error once StopAll has run.
var errStopped = errors.New("bench: the harness is stopping")

// Start starts bin with args in dir, its stderr (and stdout, unless pipes is
// set) appended to logPath. With pipes, the child's stdin and stdout are
// pipes to the harness (Proc.Stdin, Proc.Stdout).
func (g *Procs) Start(name, dir, logPath string, pipes bool, bin string, args ...string) (*Proc, error) {
	return g.StartEnv(name, dir, logPath, pipes, nil, bin, args...)
}

// StartEnv is Start with env added to the harness's environment; a logPath
// of "-" is the harness's own stderr.
func (g *Procs) StartEnv(name, dir, logPath string, pipes bool, env []string, bin string, args ...string) (*Proc, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, errStopped
	}
	logFile := os.Stderr
	if logPath != "-" {
		f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		defer f.Close() // the child has its own descriptor
		logFile = f
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stderr = logFile
	cmd.SysProcAttr = childAttr()
	p := &Proc{Name: name, LogPath: logPath, cmd: cmd, exited: make(chan struct{})}
	var outR *os.File
	if pipes {
		in, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		// Not cmd.StdoutPipe: Wait closes that as soon as the child exits,
		// losing what it wrote last and was not read yet. This pipe reads
		// to EOF, and Wait leaves it alone.
		r, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		defer w.Close() // the child has its own descriptor
		cmd.Stdout, outR = w, r
		p.Stdin, p.Stdout = in, bufio.NewReader(r)
	} else {
		cmd.Stdout = logFile
	}
	if err := cmd.Start(); err != nil {
		if outR != nil {
			outR.Close()
		}
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() {
		_ = cmd.Wait()
		p.state = cmd.ProcessState
		close(p.exited)
	}()
	g.list = append(g.list, p)
	return p, nil
}

// Pid is the child's process ID.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Exited is closed once the process has exited and been reaped.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Done reports whether the process has exited.
func (p *Proc) Done() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// State describes how the process ended ("" while it runs).
func (p *Proc) State() string {
	if !p.Done() {
		return ""
	}
	return p.state.String()
}

// Stop asks the process to exit (its stdin closed if it is a pipe, and
// SIGTERM), waits up to grace, then kills its whole process group, which
// holds only what it started.
func (p *Proc) Stop(grace time.Duration) {
	if p.Stdin != nil {
		_ = p.Stdin.Close()
	}
	if p.Done() {
		p.killGroup()
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		fmt.Fprintf(os.Stderr, "# %s (pid %d) still running %v after SIGTERM; killing its process group\n", p.Name, p.Pid(), grace)
	}
	p.killGroup()
	<-p.exited
}

// killGroup sends SIGKILL to the process group the child leads: whatever
// it started and left behind.
func (p *Proc) killGroup() {
	_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
}

// StopAll stops every process started so far, in parallel, and refuses new
// ones. It is safe to call more than once.
func (g *Procs) StopAll(grace time.Duration) {
	g.mu.Lock()
	g.closed = true
	list := g.list
	g.list = nil
	g.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range list {
		wg.Add(1)
		go func() { defer wg.Done(); p.Stop(grace) }()
	}
	wg.Wait()
}

// StopSome stops the given processes (started by g) in parallel and forgets
// them.
func (g *Procs) StopSome(grace time.Duration, ps ...*Proc) {
	g.mu.Lock()
	keep := g.list[:0]
	for _, p := range g.list {
		found := false
		for _, q := range ps {
			found = found || p == q
		}
		if !found {
			keep = append(keep, p)
		}
	}
	g.list = keep
	g.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Add(1)
		go func() { defer wg.Done(); p.Stop(grace) }()
	}
	wg.Wait()
}
