package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/fencerlock/fencer/internal/resp"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// requestTimeout bounds one request from a test. fencerd's own bound is 10s
// (plus WAIT), and a fresh node answers its first lock command only after it
// has elected itself.
const requestTimeout = 20 * time.Second

// cli runs the real redis-cli against d and returns its output lines. When
// stdout is not a terminal, redis-cli prints one line per reply element, an
// empty line for a nil reply, and error replies without "(error)".
func cli(t *testing.T, d *daemon, args ...string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	full := append([]string{"-h", "127.0.0.1", "-p", d.port}, args...)
	out, err := exec.CommandContext(ctx, "redis-cli", full...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
}

// newClient returns a go-redis client for d that speaks RESP2, sends no
// CLIENT SETINFO, never retries on its own (a retried acquire would blur
// what the test sent when) and waits long enough for a WAIT.
func newClient(t *testing.T, d *daemon) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr:            d.addr,
		Protocol:        2,
		DisableIdentity: true,
		MaxRetries:      -1,
		ReadTimeout:     2 * requestTimeout,
		WriteTimeout:    5 * time.Second,
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// grant is the reply to a granted FENCE.ACQUIRE.
type grant struct {
	token int64
	ttlMS int64
}

// acquire sends FENCE.ACQUIRE key owner ttl [WAIT wait] and returns the
// grant, or ok false for a nil reply. Any error fails the test.
func acquire(t *testing.T, c *redis.Client, key, owner string, ttl, wait time.Duration) (g grant, ok bool) {
	t.Helper()
	g, ok, err := tryAcquire(c, key, owner, ttl, wait)
	if err != nil {
		t.Fatalf("FENCE.ACQUIRE %s %s: %v", key, owner, err)
	}
	return g, ok
}

// tryAcquire is acquire for use off the test goroutine.
func tryAcquire(c *redis.Client, key, owner string, ttl, wait time.Duration) (grant, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout+wait)
	defer cancel()
	args := []any{"FENCE.ACQUIRE", key, owner, ttl.Milliseconds()}
	if wait > 0 {
		args = append(args, "WAIT", wait.Milliseconds())
	}
	v, err := c.Do(ctx, args...).Result()
	if errors.Is(err, redis.Nil) {
		return grant{}, false, nil
	}
	if err != nil {
		return grant{}, false, err
	}
	a, isArr := v.([]any)
	if !isArr || len(a) != 2 {
		return grant{}, false, fmt.Errorf("reply %#v is not [token, ttl]", v)
	}
	tok, ok1 := a[0].(int64)
	ms, ok2 := a[1].(int64)
	if !ok1 || !ok2 {
		return grant{}, false, fmt.Errorf("reply %#v is not two integers", v)
	}
	return grant{token: tok, ttlMS: ms}, true, nil
}

// release sends FENCE.RELEASE key owner and returns its integer reply.
func release(t *testing.T, c *redis.Client, key, owner string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	n, err := c.Do(ctx, "FENCE.RELEASE", key, owner).Int64()
	if err != nil {
		t.Fatalf("FENCE.RELEASE %s %s: %v", key, owner, err)
	}
	return n
}

// lockStatus is the reply to FENCE.STATUS for a held lock.
type lockStatus struct {
	owner       string
	token       int64
	remainingMS int64
}

// warmUp has each client read a free lock, so that the node has elected
// itself and every client is connected before the timed part of a test.
func warmUp(t *testing.T, clients ...*redis.Client) {
	t.Helper()
	for _, c := range clients {
		_, held := status(t, c, "warm-up")
		require.False(t, held)
	}
}

// status sends FENCE.STATUS key; held is false for a nil reply.
func status(t *testing.T, c *redis.Client, key string) (s lockStatus, held bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	v, err := c.Do(ctx, "FENCE.STATUS", key).Result()
	if errors.Is(err, redis.Nil) {
		return lockStatus{}, false
	}
	if err != nil {
		t.Fatalf("FENCE.STATUS %s: %v", key, err)
	}
	a, ok := v.([]any)
	if !ok || len(a) != 3 {
		t.Fatalf("FENCE.STATUS %s: reply %#v is not [owner, token, remaining]", key, v)
	}
	s.owner, _ = a[0].(string)
	s.token, _ = a[1].(int64)
	s.remainingMS, _ = a[2].(int64)
	return s, true
}

// respConn is one raw RESP connection, so a test can be sure that every
// command it sends goes over the same connection.
type respConn struct {
	c net.Conn
	r *bufio.Reader
}

// respError is an error reply ("-ERR ..."), as resp.ReadPlain returns it.
type respError = resp.ErrorReply

func dialRESP(t *testing.T, d *daemon) *respConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", d.addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", d.addr, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &respConn{c: c, r: bufio.NewReader(c)}
}

// do sends args as a RESP array and returns the reply: a string for a simple
// string or bulk string, int64, nil, []any, or respError.
func (rc *respConn) do(t *testing.T, args ...string) any {
	t.Helper()
	return rc.send(t, resp.Command(args...))
}

// send writes raw bytes and reads one reply.
func (rc *respConn) send(t *testing.T, raw []byte) any {
	t.Helper()
	if err := rc.c.SetDeadline(time.Now().Add(requestTimeout)); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.c.Write(raw); err != nil {
		t.Fatalf("writing %q: %v", raw, err)
	}
	v, err := resp.ReadPlain(rc.r)
	if err != nil {
		t.Fatalf("reading the reply to %q: %v", raw, err)
	}
	return v
}
