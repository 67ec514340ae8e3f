//go:build linux

package chaos

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/fencerlock/fencer/internal/resp"
)

// respError is an error reply ("-CODE text"); Code returns its first word.
type respError = resp.ErrorReply

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
		if e.Code() == "UNCERTAIN" {
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
	reply, err = resp.ReadPlain(c.r)
	return reply, true, err
}

func (c *respConn) close() {
	if c.conn != nil {
		_ = c.conn.Close()
		c.conn, c.r = nil, nil
	}
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
