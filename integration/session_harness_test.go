package integration

// Helpers of the session and election tests (session_test.go,
// election_test.go): the client process (testdata/sessionchild) that the
// tests kill or pause, fencerd's /metrics, and a pipelined read of many
// locks at once. Names start with "sc".

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fencerlock/fencer/internal/resp"
	"github.com/fencerlock/fencer/internal/testbin"
)

// scChildBin is testdata/sessionchild, built once beside the fencerd that
// TestMain built (and removes).
var scChildBin = sync.OnceValues(func() (string, error) {
	bin := filepath.Join(filepath.Dir(fencerdBin), "sessionchild")
	return bin, testbin.Build(bin, "integration/testdata/sessionchild")
})

// scPoll is the pause between polls of a process's output or a node's
// state.
const scPoll = 5 * time.Millisecond

// scLine is one line a child printed, and when the test read it.
type scLine struct {
	text string
	at   time.Time
}

// scChild is one sessionchild process.
type scChild struct {
	name    string
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	errPath string
	exited  chan struct{}

	mu     sync.Mutex
	lines  []scLine
	cursor int // lines before it were consumed by await
}

// scStart runs sessionchild with args. When the test ends, a process still
// running is resumed (if stopped) and killed.
func scStart(t *testing.T, name string, args ...string) *scChild {
	t.Helper()
	bin, err := scChildBin()
	if err != nil {
		t.Fatal(err)
	}
	errPath := filepath.Join(t.TempDir(), name+".stderr")
	errFile, err := os.Create(errPath)
	if err != nil {
		t.Fatal(err)
	}
	defer errFile.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stderr = errFile
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &scChild{name: name, cmd: cmd, stdin: stdin, errPath: errPath, exited: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.mu.Lock()
			c.lines = append(c.lines, scLine{sc.Text(), time.Now()})
			c.mu.Unlock()
		}
		_ = cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(func() {
		if !c.done() {
			_ = cmd.Process.Signal(syscall.SIGCONT)
			_ = cmd.Process.Kill()
			<-c.exited
		}
		if t.Failed() {
			c.dump(t)
		}
	})
	return c
}

func (c *scChild) done() bool {
	select {
	case <-c.exited:
		return true
	default:
		return false
	}
}

// dump logs what the child printed, with stderr.
func (c *scChild) dump(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	var b strings.Builder
	for _, l := range c.lines {
		fmt.Fprintf(&b, "  %s %s\n", l.at.Format("15:04:05.000"), l.text)
	}
	c.mu.Unlock()
	errOut, _ := os.ReadFile(c.errPath)
	t.Logf("%s (pid %d) printed:\n%sstderr:\n%s", c.name, c.cmd.Process.Pid, b.String(), errOut)
}

// next returns the first line at or after the cursor that starts with
// prefix, and moves the cursor past it.
func (c *scChild) next(prefix string) (scLine, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := c.cursor; i < len(c.lines); i++ {
		if strings.HasPrefix(c.lines[i].text, prefix) {
			c.cursor = i + 1
			return c.lines[i], true
		}
	}
	return scLine{}, false
}

// printed returns every line the child printed so far that starts with
// prefix, wherever the cursor is.
func (c *scChild) printed(prefix string) []scLine {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []scLine
	for _, l := range c.lines {
		if strings.HasPrefix(l.text, prefix) {
			out = append(out, l)
		}
	}
	return out
}

// await waits for the child's next line that starts with prefix.
func (c *scChild) await(t *testing.T, prefix string, within time.Duration) scLine {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if l, ok := c.next(prefix); ok {
			return l
		}
		if c.done() {
			if l, ok := c.next(prefix); ok {
				return l
			}
			t.Fatalf("%s exited (%v) before printing %q", c.name, c.cmd.ProcessState, prefix)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s printed no line starting with %q within %v", c.name, prefix, within)
		}
		time.Sleep(scPoll)
	}
}

// awaitPrinted waits until the child has printed a line that starts with
// prefix, anywhere in its output, and returns the first; the cursor does
// not move. For lines printed by another goroutine of the child than the
// one await follows.
func (c *scChild) awaitPrinted(t *testing.T, prefix string, within time.Duration) scLine {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if ls := c.printed(prefix); len(ls) > 0 {
			return ls[0]
		}
		if c.done() && len(c.printed(prefix)) == 0 {
			t.Fatalf("%s exited (%v) before printing %q", c.name, c.cmd.ProcessState, prefix)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s printed no line starting with %q within %v", c.name, prefix, within)
		}
		time.Sleep(scPoll)
	}
}

// scAwaitAny waits until one of cs prints a line starting with prefix and
// returns that child and line.
func scAwaitAny(t *testing.T, cs []*scChild, prefix string, within time.Duration) (*scChild, scLine) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		for _, c := range cs {
			if l, ok := c.next(prefix); ok {
				return c, l
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("none of the campaigners printed a line starting with %q within %v", prefix, within)
		}
		time.Sleep(scPoll)
	}
}

// send writes one line to the child's standard input.
func (c *scChild) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(c.stdin, line+"\n"); err != nil {
		t.Fatalf("writing to %s's stdin: %v", c.name, err)
	}
}

// kill9 kills the child with SIGKILL and waits until it is gone; it
// returns the time just before the signal.
func (c *scChild) kill9(t *testing.T) time.Time {
	t.Helper()
	at := time.Now()
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL %s: %v", c.name, err)
	}
	select {
	case <-c.exited:
	case <-time.After(stopTimeout):
		t.Fatalf("%s did not exit within %v of SIGKILL", c.name, stopTimeout)
	}
	return at
}

// pause stops the child with SIGSTOP and waits until the kernel reports
// it stopped; it returns the time just before the signal.
func (c *scChild) pause(t *testing.T) time.Time {
	t.Helper()
	at := time.Now()
	if err := c.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP %s: %v", c.name, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for fencingProcState(c.cmd.Process.Pid) != 'T' {
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) not stopped 10s after SIGSTOP", c.name, c.cmd.Process.Pid)
		}
		time.Sleep(scPoll)
	}
	return at
}

func (c *scChild) resume(t *testing.T) {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatalf("SIGCONT %s: %v", c.name, err)
	}
}

// scLock is one lock a hold child took under its session.
type scLock struct {
	key, owner string
	token      int64
}

// scHold starts a child that opens a session with ttl on addrs and takes n
// locks under it (keys prefix000...), and returns once it holds them all.
func scHold(t *testing.T, addrs []string, ttl time.Duration, n int, prefix string) (c *scChild, session string, locks []scLock) {
	t.Helper()
	c = scStart(t, "holder", "hold", "-addrs", strings.Join(addrs, ","), "-ttl", ttl.String(),
		"-keys", strconv.Itoa(n), "-prefix", prefix)
	session = strings.TrimPrefix(c.await(t, "session ", clusterReadyTimeout).text, "session ")
	c.await(t, "ready", clusterReadyTimeout)
	for _, l := range c.printed("lock ") {
		f := strings.Fields(l.text)
		if len(f) != 4 {
			t.Fatalf("holder printed %q, not \"lock KEY OWNER TOKEN\"", l.text)
		}
		tok, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil {
			t.Fatalf("holder printed %q: %v", l.text, err)
		}
		locks = append(locks, scLock{key: f[1], owner: f[2], token: tok})
	}
	if len(locks) != n {
		t.Fatalf("holder printed %d locks, want %d", len(locks), n)
	}
	return c, session, locks
}

// scWithHTTP gives d a /metrics listener on a free loopback port and
// returns its address.
func scWithHTTP(t *testing.T, d *daemon) string {
	t.Helper()
	addr := net.JoinHostPort("127.0.0.1", freePorts(t, 1)[0])
	d.args = append(d.args, "--http-listen", addr)
	return addr
}

// scMetric returns the value of one series of fencerd's /metrics at
// httpAddr, named as the text format writes it (name{label="v",...}). A
// series that is missing fails the test.
func scMetric(t *testing.T, httpAddr, series string) float64 {
	t.Helper()
	hc := &http.Client{Timeout: 5 * time.Second}
	res, err := hc.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("reading /metrics: %v", err)
	}
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`)
	m := re.FindSubmatch(body)
	if m == nil {
		t.Fatalf("/metrics at %s has no series %s", httpAddr, series)
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatalf("/metrics: %s %q: %v", series, m[1], err)
	}
	return v
}

const (
	scKeepalives = `fencer_requests_total{op="session-keepalive",outcome="alive"}`
	scExtends    = `fencer_requests_total{op="extend",outcome="extended"}`
	scWaiters    = `fencer_waiters`
)

// scAwaitMetric waits until the series at httpAddr reaches at least min.
func scAwaitMetric(t *testing.T, httpAddr, series string, min float64, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		v := scMetric(t, httpAddr, series)
		if v >= min {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s at %s is %v after %v, want at least %v", series, httpAddr, v, within, min)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// scReader reads many locks at once on one connection: FENCE.STATUS of
// every key and FENCE.SESSION INFO of a session, pipelined.
type scReader struct {
	conn net.Conn
	r    *bufio.Reader
	keys []string
	cmds []byte
}

// scState is one pipelined read.
type scState struct {
	start, end time.Time
	held       []bool
	owner      []string
	token      []int64
	// sessionLocks is the number of locks FENCE.SESSION INFO listed, -1
	// if it answered null (the session is not open).
	sessionLocks int
}

func scNewReader(t *testing.T, addr, session string, keys []string) *scReader {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	rd := &scReader{conn: conn, r: bufio.NewReader(conn), keys: keys}
	for _, k := range keys {
		rd.cmds = append(rd.cmds, resp.Command("FENCE.STATUS", k)...)
	}
	rd.cmds = append(rd.cmds, resp.Command("FENCE.SESSION", "INFO", session)...)
	return rd
}

// read sends every command and reads every reply; any error reply or
// transport failure fails the test (the node read is supposed to lead).
func (rd *scReader) read(t *testing.T) scState {
	t.Helper()
	s := scState{start: time.Now(), held: make([]bool, len(rd.keys)), owner: make([]string, len(rd.keys)),
		token: make([]int64, len(rd.keys))}
	if err := rd.conn.SetDeadline(time.Now().Add(requestTimeout)); err != nil {
		t.Fatal(err)
	}
	if _, err := rd.conn.Write(rd.cmds); err != nil {
		t.Fatalf("pipelined FENCE.STATUS: %v", err)
	}
	for i, k := range rd.keys {
		v, err := resp.ReadPlain(rd.r)
		if err != nil {
			t.Fatalf("FENCE.STATUS %s: %v", k, err)
		}
		if v == nil {
			continue
		}
		a, ok := v.([]any)
		if !ok || len(a) != 3 {
			t.Fatalf("FENCE.STATUS %s answered %#v", k, v)
		}
		s.held[i] = true
		s.owner[i], _ = a[0].(string)
		s.token[i], _ = a[1].(int64)
	}
	v, err := resp.ReadPlain(rd.r)
	if err != nil {
		t.Fatalf("FENCE.SESSION INFO: %v", err)
	}
	switch a, ok := v.([]any); {
	case v == nil:
		s.sessionLocks = -1
	case ok && len(a) == 3:
		locks, _ := a[2].([]any)
		s.sessionLocks = len(locks)
	default:
		t.Fatalf("FENCE.SESSION INFO answered %#v", v)
	}
	s.end = time.Now()
	return s
}
