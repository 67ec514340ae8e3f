// Package redistest runs real redis-server processes for tests: each on a
// free loopback port, saving nothing to disk, and stopped when its test
// ends.
package redistest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/fencerlock/fencer/internal/resp"
)

// Server is one redis-server.
type Server struct {
	// Addr is its address, 127.0.0.1:port.
	Addr   string
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process has been waited for
}

const (
	// readyTimeout bounds how long a starting server may take to answer
	// PING.
	readyTimeout = 20 * time.Second
	// stopTimeout is how long a server gets to exit after SIGTERM.
	stopTimeout = 5 * time.Second
	// tries is how often a start is tried: the free port chosen may be
	// taken before the server binds it.
	tries = 3
)

// Start starts a redis-server and stops it when the test ends. It fails
// the test, never skips it, if redis-server is not installed.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server is not on PATH; these tests need a real one."+
			" On Debian or Ubuntu install it with: apt-get install redis-server (%v)", err)
	}
	dir := t.TempDir()
	for try := 1; ; try++ {
		s, err := start(bin, dir)
		if err == nil {
			t.Cleanup(s.stop)
			return s
		}
		if try == tries {
			t.Fatalf("starting redis-server: %v", err)
		}
	}
}

// StartN starts n redis-servers as Start does.
func StartN(t testing.TB, n int) []*Server {
	t.Helper()
	servers := make([]*Server, n)
	for i := range servers {
		servers[i] = Start(t)
	}
	return servers
}

func start(bin, dir string) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	logPath := filepath.Join(dir, "redis-"+port+".log")
	cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--logfile", logPath)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", port), cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.exited) }()
	deadline := time.Now().Add(readyTimeout)
	for ping(s.Addr) != nil {
		select {
		case <-s.exited:
			log, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("redis-server on port %s exited: %s", port, log)
		default:
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("redis-server on port %s did not answer PING within %v", port, readyTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return s, nil
}

// Ping sends PING on c, checks that the answer is PONG and closes c: the
// readiness check of a RESP server, redis-server or fencerd.
func Ping(c net.Conn) error {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write(resp.Command("PING")); err != nil {
		return err
	}
	v, err := resp.ReadValue(bufio.NewReader(c))
	if err != nil {
		return err
	}
	if v.Kind != resp.SimpleString || v.Str != "PONG" {
		return fmt.Errorf("PING answered %v", v)
	}
	return nil
}

// ping dials addr and pings it.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	return Ping(c)
}

// stop sends SIGTERM, then SIGKILL if the server has not exited within
// stopTimeout, and waits for it.
func (s *Server) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(stopTimeout):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}
