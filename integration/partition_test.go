package integration

import (
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// Helpers of the formation and Raft-connection tests that cut network
// paths and read FENCE.FORMING.

// gateProxy is a TCP proxy that can be closed and opened again: a
// partition of one network path (one node's view of another's port), which
// loopback cannot make on demand. While blocked it closes every connection
// it accepts and every one it carries.
type gateProxy struct {
	ln      net.Listener
	target  string
	mu      sync.Mutex
	blocked bool
	conns   []net.Conn
}

func newGateProxy(t *testing.T, target string, blocked bool) *gateProxy {
	t.Helper()
	return newGateProxyAt(t, "127.0.0.1:0", target, blocked)
}

// newGateProxyAt is newGateProxy listening on listen.
func newGateProxyAt(t *testing.T, listen, target string, blocked bool) *gateProxy {
	t.Helper()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	p := &gateProxy{ln: ln, target: target, blocked: blocked}
	go p.serve()
	t.Cleanup(func() { _ = ln.Close(); p.block() })
	return p
}

func (p *gateProxy) addr() string { return p.ln.Addr().String() }

func (p *gateProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		blocked := p.blocked
		p.mu.Unlock()
		if blocked {
			c.Close()
			continue
		}
		s, err := net.DialTimeout("tcp", p.target, time.Second)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.blocked {
			p.mu.Unlock()
			c.Close()
			s.Close()
			continue
		}
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(s, c); s.Close() }()
		go func() { _, _ = io.Copy(c, s); c.Close() }()
	}
}

// block cuts the path: open connections are closed, new ones refused.
func (p *gateProxy) block() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocked = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// open heals the path.
func (p *gateProxy) open() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocked = false
}

// formingReport asks addr for FENCE.FORMING and returns its fields by key
// (members as []any of [id, raft, client, removed, ran]); nil if it did not
// answer.
func formingReport(addr string) map[string]any {
	v, err := clusterCall(addr, requestTimeout, "FENCE.FORMING")
	if err != nil {
		return nil
	}
	a, _ := v.([]any)
	m := map[string]any{}
	for i := 0; i+1 < len(a); i += 2 {
		k, _ := a[i].(string)
		m[k] = a[i+1]
	}
	return m
}

// recordedClientAddr returns the client address the report's configuration
// records for id, and whether the configuration names id.
func recordedClientAddr(rep map[string]any, id string) (string, bool) {
	ms, _ := rep["members"].([]any)
	for _, row := range ms {
		f, _ := row.([]any)
		if len(f) >= 3 && f[0] == id {
			s, _ := f[2].(string)
			return s, true
		}
	}
	return "", false
}

// grepLines returns the lines of log that hold s.
func grepLines(log, s string) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return fmt.Sprint(strings.Join(out, "\n"))
}

// argValue returns the value that follows flag in args.
func argValue(t *testing.T, args []string, flag string) string {
	t.Helper()
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			return args[i+1]
		}
	}
	t.Fatalf("no %s in %v", flag, args)
	return ""
}
