package fenceetcd_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/namespace"
	"go.uber.org/zap"
)

// missingEtcd is the advice given when etcd cannot be started.
const missingEtcd = "these tests need a real etcd server (3.4 or later);" +
	" on Debian or Ubuntu install it with: apt-get install etcd-server" +
	" (or set ETCD to the path of an etcd binary)"

// etcdServer is an etcd process of the tests: a one-member cluster on free
// loopback ports, in a temporary directory.
type etcdServer struct {
	cmd      *exec.Cmd
	dir      string
	endpoint string
	exited   chan struct{} // closed when the process has exited
}

// server and cli are the etcd that TestMain starts for all the tests, and a
// client of it. Each test works under a namespace of its own (see kv).
var (
	server *etcdServer
	cli    *clientv3.Client
)

func TestMain(m *testing.M) {
	var err error
	server, err = startEtcd()
	if err != nil {
		fmt.Fprintf(os.Stderr, "fenceetcd tests: starting etcd: %v\n%s\n", err, missingEtcd)
		os.Exit(1)
	}
	// The client's log would only repeat, as JSON, errors the tests check.
	cli, err = clientv3.New(clientv3.Config{Endpoints: []string{server.endpoint}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	code := 1
	if err != nil {
		fmt.Fprintf(os.Stderr, "fenceetcd tests: etcd client: %v\n", err)
	} else {
		code = m.Run()
		cli.Close()
	}
	if err := server.stop(); err != nil {
		fmt.Fprintf(os.Stderr, "fenceetcd tests: stopping etcd: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// namespaces holds the namespace of each running test (see ns).
var namespaces sync.Map // *testing.T → string

// runs numbers the namespaces, so that a test run again (-count) starts
// afresh on the same server.
var runs atomic.Int64

// ns returns the prefix under which the test keeps its keys, the tokens'
// too: its name and a number of its own, so that tests sharing the server
// do not meet.
func ns(t *testing.T) string {
	t.Helper()
	p, loaded := namespaces.LoadOrStore(t, fmt.Sprintf("%s#%d/", t.Name(), runs.Add(1)))
	if !loaded {
		t.Cleanup(func() { namespaces.Delete(t) })
	}
	return p.(string)
}

// kv returns a view of the tests' etcd inside the test's namespace.
func kv(t *testing.T) clientv3.KV {
	t.Helper()
	return namespace.NewKV(cli.KV, ns(t))
}

// etcdBinary returns the etcd to run: $ETCD, or etcd on PATH.
func etcdBinary() (string, error) {
	if p := os.Getenv("ETCD"); p != "" {
		return p, nil
	}
	return exec.LookPath("etcd")
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	_, port, err := net.SplitHostPort(ln.Addr().String())
	return port, err
}

// startEtcd starts an etcd and waits until it answers. A port taken by
// another process between freePort and etcd's bind makes etcd exit; it is
// tried again on new ports.
func startEtcd() (*etcdServer, error) {
	var err error
	for range 3 {
		var s *etcdServer
		if s, err = tryStartEtcd(); err == nil {
			return s, nil
		}
	}
	return nil, err
}

func tryStartEtcd() (*etcdServer, error) {
	bin, err := etcdBinary()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "fenceetcd-")
	if err != nil {
		return nil, err
	}
	clientPort, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	peerPort, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	clientURL, peerURL := "http://127.0.0.1:"+clientPort, "http://127.0.0.1:"+peerPort
	log, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer log.Close()
	cmd := exec.Command(bin,
		"--name", "fenceetcd-test",
		"--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", clientURL,
		"--advertise-client-urls", clientURL,
		"--listen-peer-urls", peerURL,
		"--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "fenceetcd-test="+peerURL,
		"--initial-cluster-state", "new",
		"--initial-cluster-token", "fenceetcd-test-"+filepath.Base(dir),
	)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &etcdServer{cmd: cmd, dir: dir, endpoint: clientURL, exited: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(s.exited)
	}()
	if err := s.waitReady(30 * time.Second); err != nil {
		out, _ := os.ReadFile(log.Name())
		s.stop()
		return nil, fmt.Errorf("%v\netcd's log:\n%s", err, tail(string(out), 40))
	}
	return s, nil
}

// waitDial waits until addr accepts a connection, or the process whose
// exit closes exited has exited.
func waitDial(addr string, timeout time.Duration, exited <-chan struct{}) error {
	deadline := time.Now().Add(timeout)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return conn.Close()
		}
		select {
		case <-exited:
			return fmt.Errorf("exited before it listened on %s", addr)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not accept a connection within %v: %w", addr, timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitReady waits until etcd serves a linearizable read. It first waits
// for the port, as the client logs every refused dial.
func (s *etcdServer) waitReady(timeout time.Duration) error {
	if err := waitDial(strings.TrimPrefix(s.endpoint, "http://"), timeout, s.exited); err != nil {
		return err
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{s.endpoint}, DialTimeout: timeout, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer c.Close()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := c.Get(ctx, "ready")
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("etcd exited before it was ready: %v", s.cmd.ProcessState)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("etcd at %s did not answer within %v: %w", s.endpoint, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop stops etcd (SIGTERM, then SIGKILL after 10 s) and removes its
// directory.
func (s *etcdServer) stop() error {
	defer os.RemoveAll(s.dir)
	select {
	case <-s.exited:
		return nil
	default:
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-s.exited:
		return nil
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
		return errors.New("etcd did not stop within 10s of SIGTERM; killed")
	}
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
