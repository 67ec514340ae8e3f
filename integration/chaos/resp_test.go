//go:build linux

package chaos

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fencerlock/fencer/internal/resp"
)

// respError is an error reply ("-PREFIX text").
type respError string

// prefix returns the error's first word: UNCERTAIN, NOLEADER, ERR...
func (e respError) prefix() string {
	p, _, _ := strings.Cut(string(e), " ")
	return p
}

// outcome classifies how a request ended, as far as the client can tell.
type outcome int

const (
	// ok: a reply that is not an error.
	ok outcome = iota
	// failed: the command certainly did not take effect (not sent, or an
	// error reply that says nothing was done).
	failed
	// unknown: it may or may not have taken effect (UNCERTAIN, a timeout or
	// a connection lost after sending).
	unknown
)

// classify maps a reply, or a transport error and whether the request was
// sent, to an outcome. Only UNCERTAIN among the error replies leaves the
// outcome open; NOLEADER, NOTLEADER, TIMEOUT, SHUTDOWN and ERR promise that
// nothing was done (docs/protocol.md), and the checkers hold fencerd to it.
func classify(reply any, err error, sent bool) outcome {
	switch {
	case err != nil && sent:
		return unknown
	case err != nil:
		return failed
	}
	if e, isErr := reply.(respError); isErr {
		if e.prefix() == "UNCERTAIN" {
			return unknown
		}
		return failed
	}
	return ok
}

// respConn is one client connection to one node, dialled from the hub
// namespace. It is used by one goroutine at a time. After any transport
// failure it is closed and the next do dials again.
type respConn struct {
	dial func() (net.Conn, error)
	conn net.Conn
	r    *bufio.Reader
}

// do sends one command and reads its reply within timeout. sent reports
// whether any byte of the command may have reached the server.
func (c *respConn) do(timeout time.Duration, args ...string) (reply any, sent bool, err error) {
	if c.conn == nil {
		conn, err := c.dial()
		if err != nil {
			return nil, false, err
		}
		c.conn, c.r = conn, bufio.NewReader(conn)
	}
	defer func() {
		if err != nil {
			c.close()
		}
	}()
	if err := c.conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return nil, false, err
	}
	if _, err := c.conn.Write(resp.Command(args...)); err != nil {
		return nil, true, err
	}
	reply, err = readReply(c.r)
	return reply, true, err
}

func (c *respConn) close() {
	if c.conn != nil {
		_ = c.conn.Close()
		c.conn, c.r = nil, nil
	}
}

// readReply reads one RESP2 reply: a string for simple and bulk strings,
// respError, int64, []any, or nil for a null.
func readReply(r *bufio.Reader) (any, error) {
	v, err := resp.ReadValue(r)
	if err != nil {
		return nil, err
	}
	return replyOf(v)
}

// replyOf converts a parsed reply to readReply's shapes. The connections
// never ask for RESP3, so a RESP3 type is the server's mistake: an error.
func replyOf(v resp.Value) (any, error) {
	switch v.Kind {
	case resp.SimpleString:
		return v.Str, nil
	case resp.Error:
		return respError(v.Str), nil
	case resp.Integer:
		return v.Int, nil
	case resp.BulkString:
		if v.IsNull {
			return nil, nil
		}
		return v.Str, nil
	case resp.Array:
		if v.IsNull {
			return nil, nil
		}
		out := make([]any, len(v.Elems))
		for i, e := range v.Elems {
			var err error
			if out[i], err = replyOf(e); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("reply %v is not RESP2", v)
}

// errNotGrant means an ACQUIRE reply was neither null nor [token, ttl].
var errNotGrant = errors.New("chaos: reply is not a grant")

// asGrant decodes a FENCE.ACQUIRE reply: granted false for null.
func asGrant(v any) (token uint64, granted bool, err error) {
	if v == nil {
		return 0, false, nil
	}
	a, isArr := v.([]any)
	if !isArr || len(a) != 2 {
		return 0, false, fmt.Errorf("%w: %#v", errNotGrant, v)
	}
	tok, ok1 := a[0].(int64)
	if _, ok2 := a[1].(int64); !ok1 || !ok2 || tok <= 0 {
		return 0, false, fmt.Errorf("%w: %#v", errNotGrant, v)
	}
	return uint64(tok), true, nil
}

// asStatus decodes a FENCE.STATUS reply: held false for null.
func asStatus(v any) (owner string, token uint64, held bool, err error) {
	if v == nil {
		return "", 0, false, nil
	}
	a, isArr := v.([]any)
	if !isArr || len(a) != 3 {
		return "", 0, false, fmt.Errorf("FENCE.STATUS answered %#v", v)
	}
	owner, ok1 := a[0].(string)
	tok, ok2 := a[1].(int64)
	if !ok1 || !ok2 || tok <= 0 {
		return "", 0, false, fmt.Errorf("FENCE.STATUS answered %#v", v)
	}
	return owner, uint64(tok), true, nil
}

// readReply gives the shapes the checkers compare, and refuses what a RESP2
// connection must not receive.
func TestRespReadReply(t *testing.T) {
	tests := []struct {
		name, in string
		want     any
	}{
		{"simple string", "+OK\r\n", "OK"},
		{"error", "-UNCERTAIN outcome unknown\r\n", respError("UNCERTAIN outcome unknown")},
		{"integer", ":-3\r\n", int64(-3)},
		{"bulk string", "$5\r\nowner\r\n", "owner"},
		{"empty bulk string", "$0\r\n\r\n", ""},
		{"null bulk string", "$-1\r\n", nil},
		{"null array", "*-1\r\n", nil},
		{"grant", "*2\r\n:42\r\n:10000\r\n", []any{int64(42), int64(10000)}},
		{"status", "*3\r\n$2\r\nme\r\n:4\r\n:9979\r\n", []any{"me", int64(4), int64(9979)}},
		{"nested", "*2\r\n*1\r\n+a\r\n$-1\r\n", []any{[]any{"a"}, nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readReply(bufio.NewReader(strings.NewReader(tt.in)))
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("readReply(%q) = %#v, %v; want %#v", tt.in, got, err, tt.want)
			}
		})
	}
	for _, in := range []string{"_\r\n", "*1\r\n#t\r\n", "%1\r\n+a\r\n:1\r\n", "?\r\n", "$3\r\nab\r\n", "+OK\n"} {
		if got, err := readReply(bufio.NewReader(strings.NewReader(in))); err == nil {
			t.Errorf("readReply(%q) = %#v; want an error", in, got)
		}
	}
}
