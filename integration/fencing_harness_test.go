package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fencerlock/fencer/fence"
	"github.com/fencerlock/fencer/fence/fencehttp"
	"github.com/fencerlock/fencer/internal/testbin"
	"github.com/redis/go-redis/v9"
)

// This file holds the helpers of the fencing scenario (fencing_*_test.go):
// the lock client as a separate process, a store over HTTP, and the
// narrative the demo prints (redistest runs its redis-servers). Every name
// starts with "fencing" to keep clear of the other tests in this package.

// fencingClientBin is the lockclient binary (internal/cmd/lockclient), built
// once, beside the fencerd that TestMain built (and removes).
var fencingClientBin = sync.OnceValues(func() (string, error) {
	bin := filepath.Join(filepath.Dir(fencerdBin), "lockclient")
	return bin, testbin.Build(bin, "internal/cmd/lockclient")
})

// fencingStory prints the scenario as it happens, with the time since it
// began, without go test's file:line prefixes: `make demo` shows it.
type fencingStory struct {
	t     *testing.T
	start time.Time
}

func newFencingStory(t *testing.T, title string) *fencingStory {
	s := &fencingStory{t: t, start: time.Now()}
	fmt.Fprintf(t.Output(), "\n%s\n%s\n", title, strings.Repeat("─", len([]rune(title))))
	return s
}

func (s *fencingStory) say(format string, args ...any) {
	fmt.Fprintf(s.t.Output(), "%6.2fs  %s\n", time.Since(s.start).Seconds(), fmt.Sprintf(format, args...))
}

// fencingProcess is client 1: lockclient running as its own process, its
// output lines read as they come.
type fencingProcess struct {
	cmd     *exec.Cmd
	started time.Time // before the process started: before any request it sent
	stdin   io.WriteCloser
	lines   chan string
	errPath string
	exited  chan struct{}
	state   *os.ProcessState
	story   *fencingStory
}

// startFencingClient runs lockclient with args and -gate. When the test
// ends, a process still running is resumed (if stopped) and killed.
func startFencingClient(t *testing.T, story *fencingStory, args ...string) *fencingProcess {
	t.Helper()
	bin, err := fencingClientBin()
	if err != nil {
		t.Fatal(err)
	}
	errPath := filepath.Join(t.TempDir(), "lockclient.stderr")
	errFile, err := os.Create(errPath)
	if err != nil {
		t.Fatal(err)
	}
	defer errFile.Close()
	cmd := exec.Command(bin, append(args, "-gate")...)
	cmd.Stderr = errFile
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &fencingProcess{cmd: cmd, stdin: stdin, lines: make(chan string, 100), errPath: errPath,
		exited: make(chan struct{}), story: story}
	p.started = time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting lockclient: %v", err)
	}
	// Lines first, then Wait: Wait closes the pipe once the process exits.
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		_ = cmd.Wait()
		p.state = cmd.ProcessState
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
			return
		default:
		}
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		for range p.lines {
		}
		<-p.exited
	})
	return p
}

// expect reads client 1's output until a line that starts with prefix, and
// returns it; every line read is told in the story.
func (p *fencingProcess) expect(t *testing.T, prefix string, timeout time.Duration) string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				<-p.exited
				errOut, _ := os.ReadFile(p.errPath)
				t.Fatalf("client 1 exited (%v) before printing %q; stderr:\n%s", p.state, prefix, errOut)
			}
			p.story.say("client 1 │ %s", line)
			if strings.HasPrefix(line, prefix) {
				return line
			}
		case <-deadline:
			t.Fatalf("client 1 printed no line starting with %q within %v", prefix, timeout)
		}
	}
}

// pause stops the process with SIGSTOP and waits until the kernel reports
// it stopped.
func (p *fencingProcess) pause(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for fencingProcState(p.cmd.Process.Pid) != 'T' {
		if time.Now().After(deadline) {
			t.Fatalf("client 1 (pid %d) not stopped 10s after SIGSTOP", p.cmd.Process.Pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// fencingProcState returns the state letter of a process from
// /proc/PID/stat ('T' when stopped), or 0 if it cannot be read.
func fencingProcState(pid int) byte {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 >= len(b) {
		return 0
	}
	return b[i+2]
}

// openGate sends the line that client 1 reads between its lease check and
// its write; a stopped process reads it when it resumes.
func (p *fencingProcess) openGate(t *testing.T) {
	t.Helper()
	if _, err := io.WriteString(p.stdin, "write\n"); err != nil {
		t.Fatalf("writing to client 1's stdin: %v", err)
	}
}

func (p *fencingProcess) resume(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatalf("SIGCONT: %v", err)
	}
}

// wait waits for the process to exit and fails the test unless it exited 0.
func (p *fencingProcess) wait(t *testing.T) {
	t.Helper()
	for line := range p.lines {
		p.story.say("client 1 │ %s", line)
	}
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("client 1 did not exit within 30s of its last line")
	}
	if code := p.state.ExitCode(); code != 0 {
		errOut, _ := os.ReadFile(p.errPath)
		t.Fatalf("client 1 exited with %d; stderr:\n%s", code, errOut)
	}
}

// fencingWrite is one PUT that reached the store.
type fencingWrite struct {
	at     time.Time
	token  string // the Fencing-Token header, "" if none
	value  string
	status int
}

// fencingStore is the protected storage of the scenario: one document, over
// HTTP, on a loopback port. Fenced, it sits behind fencehttp's middleware;
// plain, it takes every write. It logs every PUT and its outcome.
type fencingStore struct {
	url string

	mu    sync.Mutex
	value string
	log   []fencingWrite
}

func startFencingStore(t *testing.T, fenced bool) *fencingStore {
	t.Helper()
	s := &fencingStore{}
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.value = string(body)
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	if fenced {
		h = fencehttp.Middleware(fence.NewMemory(), func(r *http.Request) string { return r.URL.Path })(h)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPut {
			http.Error(w, "PUT only", http.StatusMethodNotAllowed)
			return
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		rec := &fencingStatus{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(rec, r)
		s.mu.Lock()
		s.log = append(s.log, fencingWrite{at: time.Now(), token: r.Header.Get(fencehttp.Header), value: string(body), status: rec.code})
		s.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	s.url = srv.URL + "/report"
	return s
}

// fencingStatus records the status a handler answered.
type fencingStatus struct {
	http.ResponseWriter
	code int
}

func (w *fencingStatus) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

func (s *fencingStore) snapshot() (string, []fencingWrite) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.value, append([]fencingWrite(nil), s.log...)
}

// fencingWaitLeader waits until d has elected itself (FENCE.STATUS, a
// linearizable read, is answered only through a leader), so that the story
// times leases, not start-up.
func fencingWaitLeader(t *testing.T, d *daemon) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: d.addr, Protocol: 2, DisableIdentity: true, MaxRetries: -1,
		ReadTimeout: readyTimeout})
	defer c.Close()
	deadline := time.Now().Add(readyTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
		err := c.Do(ctx, "FENCE.STATUS", "fencing-warm-up").Err()
		cancel()
		if err == nil || errors.Is(err, redis.Nil) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("fencerd %s has no leader after %v: %v", d.addr, readyTimeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
