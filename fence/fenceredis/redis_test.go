package fenceredis_test

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencerlock/fencer/internal/resp"
	"github.com/redis/go-redis/v9"
)

// redisServer is a redis-server of the test's own, on a free loopback port,
// saving nothing to disk.
type redisServer struct {
	addr   string
	cmd    *exec.Cmd
	exited chan struct{}
}

// startRedis starts redis-server and stops it when the test ends. It fails
// the test (never skips it) if redis-server is not installed.
func startRedis(t *testing.T) *redisServer {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server is not on PATH; these tests need a real one."+
			" On Debian or Ubuntu install it with: apt-get install redis-server (%v)", err)
	}
	dir := t.TempDir()
	var lastErr error
	for range 3 { // the free port may be taken before redis binds it
		s, err := tryStartRedis(t, bin, dir)
		if err == nil {
			return s
		}
		lastErr = err
	}
	t.Fatalf("starting redis-server: %v", lastErr)
	return nil
}

func tryStartRedis(t *testing.T, bin, dir string) (*redisServer, error) {
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
	s := &redisServer{addr: net.JoinHostPort("127.0.0.1", port), cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.exited) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		select {
		case <-s.exited:
			log, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("redis-server on port %s exited: %s", port, log)
		default:
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("redis-server on port %s did not accept connections within 10s", port)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Cleanup(s.stop)
	return s, nil
}

// stop sends SIGTERM, then SIGKILL if the server has not exited within 5s,
// and waits for it.
func (s *redisServer) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

func (s *redisServer) client(t *testing.T) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.addr, DisableIdentity: true})
	t.Cleanup(func() { c.Close() })
	return c
}

// monitor records every command the server runs, Lua scripts' own calls
// included, in the order it runs them (MONITOR on a raw connection).
type monitor struct {
	conn  net.Conn
	lines chan string
}

func startMonitor(t *testing.T, s *redisServer) *monitor {
	t.Helper()
	c, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write(resp.Command("MONITOR")); err != nil {
		t.Fatal(err)
	}
	m := &monitor{conn: c, lines: make(chan string, 1<<16)}
	// A line shows a command with all its arguments, a script sent with
	// EVAL included: more room than bufio's default.
	r := bufio.NewReaderSize(c, 1<<20)
	if v, err := resp.ReadValue(r); err != nil || v.Kind != resp.SimpleString || v.Str != "OK" {
		t.Fatalf("MONITOR answered %v, %v", v, err)
	}
	go func() {
		defer close(m.lines)
		for {
			v, err := resp.ReadValue(r)
			if err != nil || v.Kind != resp.SimpleString {
				return
			}
			m.lines <- v.Str
		}
	}()
	return m
}

// until returns the lines recorded up to the first one that contains mark
// (a command the test sends after the ones it wants to see).
func (m *monitor) until(t *testing.T, mark string) []string {
	t.Helper()
	var out []string
	timeout := time.After(30 * time.Second)
	for {
		select {
		case line, ok := <-m.lines:
			if !ok {
				t.Fatal("MONITOR connection closed")
			}
			if strings.Contains(line, mark) {
				return out
			}
			out = append(out, line)
		case <-timeout:
			t.Fatalf("MONITOR did not show %q within 30s", mark)
		}
	}
}
