package bench

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/fencerlock/fencer/internal/resp"
)

// pipeConn returns a conn whose server side answers every request with
// reply, and records what it was sent.
func pipeConn(t *testing.T, reply string) (*conn, <-chan string) {
	t.Helper()
	client, server := net.Pipe()
	t.Cleanup(func() { client.Close(); server.Close() })
	sent := make(chan string, 1)
	go func() {
		buf := make([]byte, 4096)
		n, err := server.Read(buf)
		if err != nil {
			return
		}
		sent <- string(buf[:n])
		_, _ = server.Write([]byte(reply))
	}()
	return newConn(client), sent
}

func TestAcquireReplies(t *testing.T) {
	tests := []struct {
		name, reply string
		token       uint64
		err         string // substring; empty for none
	}{
		{"granted", "*2\r\n:42\r\n:10000\r\n", 42, ""},
		{"null bulk", "$-1\r\n", 0, ""},
		{"null array", "*-1\r\n", 0, ""},
		{"resp3 null", "_\r\n", 0, ""},
		{"uncertain", "-UNCERTAIN outcome unknown\r\n", 0, "UNCERTAIN outcome unknown"},
		{"integer", ":1\r\n", 0, "FENCE.ACQUIRE answered integer 1"},
		{"zero token", "*2\r\n:0\r\n:10000\r\n", 0, "answered an array of 2"},
		{"garbage", "?\r\n", 0, "protocol error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, sent := pipeConn(t, tt.reply)
			tok, err := c.Acquire("k", []byte("o"), 10*time.Second, 0, time.Now().Add(5*time.Second))
			if got := <-sent; got != "*4\r\n$13\r\nFENCE.ACQUIRE\r\n$1\r\nk\r\n$1\r\no\r\n$5\r\n10000\r\n" {
				t.Errorf("sent %q", got)
			}
			if tok != tt.token {
				t.Errorf("token %d, want %d", tok, tt.token)
			}
			switch {
			case tt.err == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Errorf("error %v, want one with %q", err, tt.err)
			}
		})
	}
}

func TestAcquireWaitAndRelease(t *testing.T) {
	c, sent := pipeConn(t, "*2\r\n:7\r\n:500\r\n")
	tok, err := c.Acquire("key", []byte("owner-1"), 500*time.Millisecond, 2*time.Second, time.Now().Add(5*time.Second))
	if err != nil || tok != 7 {
		t.Fatalf("Acquire = %d, %v; want 7", tok, err)
	}
	want := "*6\r\n$13\r\nFENCE.ACQUIRE\r\n$3\r\nkey\r\n$7\r\nowner-1\r\n$3\r\n500\r\n$4\r\nWAIT\r\n$4\r\n2000\r\n"
	if got := <-sent; got != want {
		t.Errorf("sent %q, want %q", got, want)
	}

	c, sent = pipeConn(t, "-SHUTDOWN the server is shutting down\r\n")
	_, err = c.Release("key", []byte("owner-1"), time.Now().Add(5*time.Second))
	var se ServerError
	if !errors.As(err, &se) || !strings.HasPrefix(string(se), "SHUTDOWN") {
		t.Errorf("Release error %v, want a SHUTDOWN ServerError", err)
	}
	if got := <-sent; got != "*3\r\n$13\r\nFENCE.RELEASE\r\n$3\r\nkey\r\n$7\r\nowner-1\r\n" {
		t.Errorf("sent %q", got)
	}
}

func TestReadNestedArray(t *testing.T) {
	// FENCE.MEMBERS: an array of arrays.
	c, sent := pipeConn(t, "*2\r\n*2\r\n$2\r\nn1\r\n$4\r\nlead\r\n*2\r\n$2\r\nn2\r\n$0\r\n\r\n")
	r, err := c.Do(time.Now().Add(5*time.Second), "FENCE.MEMBERS")
	if err != nil {
		t.Fatal(err)
	}
	if got := <-sent; got != "*1\r\n$13\r\nFENCE.MEMBERS\r\n" {
		t.Errorf("sent %q", got)
	}
	if r.Kind != resp.Array || len(r.Elems) != 2 || r.Elems[1].Kind != resp.Array {
		t.Fatalf("got %v", r)
	}
	if got := r.String(); got != `*[*["n1", "lead"], *["n2", ""]]` {
		t.Errorf("got %s", got)
	}
}

// BenchmarkClientPair is one acquire+release round trip of the harness's
// client against NullServer (make gobench). The client allocates nothing
// per pair; the allocations reported are the server's (go test -memprofile),
// and BenchmarkClientPairCanned shows the client alone.
func BenchmarkClientPair(b *testing.B) {
	s, err := StartNullServer()
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	c, err := dial(s.Addr(), time.Second)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	owner := []byte("bench-owner")
	b.ReportAllocs()
	for b.Loop() {
		deadline := time.Now().Add(5 * time.Second)
		if tok, err := c.Acquire("bench-key", owner, 10*time.Second, 0, deadline); err != nil || tok == 0 {
			b.Fatalf("acquire: %d, %v", tok, err)
		}
		if n, err := c.Release("bench-key", owner, deadline); err != nil || n != 1 {
			b.Fatalf("release: %d, %v", n, err)
		}
	}
}

// cannedConn is a connection that discards what is written and reads an
// endless repetition of replies, so a benchmark over it measures the
// client alone: no server shares its process, its allocations or its CPU.
type cannedConn struct {
	net.Conn
	replies []byte
	off     int
}

func (c *cannedConn) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m := copy(p[n:], c.replies[c.off:])
		n += m
		c.off = (c.off + m) % len(c.replies)
	}
	return n, nil
}

func (c *cannedConn) Write(p []byte) (int, error)      { return len(p), nil }
func (c *cannedConn) SetDeadline(time.Time) error      { return nil }
func (c *cannedConn) SetReadDeadline(time.Time) error  { return nil }
func (c *cannedConn) SetWriteDeadline(time.Time) error { return nil }

// BenchmarkClientPairCanned is BenchmarkClientPair's acquire and release
// against canned replies: the client's own cost per pair, which should
// allocate nothing.
func BenchmarkClientPairCanned(b *testing.B) {
	cc := &cannedConn{replies: []byte("*2\r\n:42\r\n:10000\r\n:1\r\n")}
	c := newConn(cc)
	owner := []byte("bench-owner")
	b.ReportAllocs()
	for b.Loop() {
		deadline := time.Now().Add(5 * time.Second)
		if tok, err := c.Acquire("bench-key", owner, 10*time.Second, 0, deadline); err != nil || tok != 42 {
			b.Fatalf("acquire: %d, %v", tok, err)
		}
		if n, err := c.Release("bench-key", owner, deadline); err != nil || n != 1 {
			b.Fatalf("release: %d, %v", n, err)
		}
	}
}
