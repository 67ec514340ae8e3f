package bench

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// conn is one RESP2 connection with at most one request in flight: the
// load generator's client. It writes each command from one reused buffer
// and parses only the reply shapes the lock commands have, so that a
// client goroutine costs the server far more than it costs itself.
type conn struct {
	nc  net.Conn
	r   *bufio.Reader
	buf []byte
	arr []reply
}

// reply is one parsed RESP value: kind is the type byte ('*', ':', '$',
// '+', '-'), or 0 for a null.
type reply struct {
	kind byte
	n    int64  // integer value, array length or bulk length
	s    string // simple string, error or bulk string
}

// ServerError is an error reply ("-UNCERTAIN ...").
type ServerError string

func (e ServerError) Error() string { return string(e) }

// errProtocol marks a reply the client cannot parse.
var errProtocol = errors.New("bench: RESP protocol error")

func dial(addr string, timeout time.Duration) (*conn, error) {
	nc, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	return &conn{nc: nc, r: bufio.NewReaderSize(nc, 4096), buf: make([]byte, 0, 256)}, nil
}

func (c *conn) Close() error { return c.nc.Close() }

// begin starts a command of n arguments.
func (c *conn) begin(n int) {
	c.buf = append(c.buf[:0], '*')
	c.buf = strconv.AppendInt(c.buf, int64(n), 10)
	c.buf = append(c.buf, '\r', '\n')
}

func (c *conn) arg(b []byte) {
	c.buf = append(c.buf, '$')
	c.buf = strconv.AppendInt(c.buf, int64(len(b)), 10)
	c.buf = append(c.buf, '\r', '\n')
	c.buf = append(c.buf, b...)
	c.buf = append(c.buf, '\r', '\n')
}

func (c *conn) argString(s string) {
	c.buf = append(c.buf, '$')
	c.buf = strconv.AppendInt(c.buf, int64(len(s)), 10)
	c.buf = append(c.buf, '\r', '\n')
	c.buf = append(c.buf, s...)
	c.buf = append(c.buf, '\r', '\n')
}

func (c *conn) argInt(v int64) {
	var tmp [20]byte
	c.arg(strconv.AppendInt(tmp[:0], v, 10))
}

// roundTrip sends the command in c.buf and reads one reply, all before
// deadline (zero: none).
func (c *conn) roundTrip(deadline time.Time) (reply, error) {
	if err := c.nc.SetDeadline(deadline); err != nil {
		return reply{}, err
	}
	if _, err := c.nc.Write(c.buf); err != nil {
		return reply{}, err
	}
	return c.read()
}

// Acquire sends FENCE.ACQUIRE key owner ttl [WAIT wait]. It returns the
// token, or 0 for a null reply (not granted).
func (c *conn) Acquire(key string, owner []byte, ttl, wait time.Duration, deadline time.Time) (uint64, error) {
	if wait > 0 {
		c.begin(6)
	} else {
		c.begin(4)
	}
	c.argString("FENCE.ACQUIRE")
	c.argString(key)
	c.arg(owner)
	c.argInt(ttl.Milliseconds())
	if wait > 0 {
		c.argString("WAIT")
		c.argInt(max(wait.Milliseconds(), 1))
	}
	r, err := c.roundTrip(deadline)
	if err != nil {
		return 0, err
	}
	switch {
	case r.kind == 0:
		return 0, nil
	case r.kind == '*' && len(c.arr) == 2 && c.arr[0].kind == ':' && c.arr[0].n > 0:
		return uint64(c.arr[0].n), nil
	}
	return 0, fmt.Errorf("%w: FENCE.ACQUIRE answered %s", errProtocol, c.describe(r))
}

// Release sends FENCE.RELEASE key owner and returns the integer reply.
func (c *conn) Release(key string, owner []byte, deadline time.Time) (int64, error) {
	c.begin(3)
	c.argString("FENCE.RELEASE")
	c.argString(key)
	c.arg(owner)
	r, err := c.roundTrip(deadline)
	if err != nil {
		return 0, err
	}
	if r.kind != ':' {
		return 0, fmt.Errorf("%w: FENCE.RELEASE answered %s", errProtocol, c.describe(r))
	}
	return r.n, nil
}

// Do sends any command of string arguments and returns the reply; for an
// array, the elements are in c.arr (one level deep only).
func (c *conn) Do(deadline time.Time, args ...string) (reply, error) {
	c.begin(len(args))
	for _, a := range args {
		c.argString(a)
	}
	return c.roundTrip(deadline)
}

func (c *conn) describe(r reply) string {
	switch r.kind {
	case 0:
		return "null"
	case ':':
		return "integer " + strconv.FormatInt(r.n, 10)
	case '*':
		return fmt.Sprintf("an array of %d", r.n)
	default:
		return strconv.Quote(r.s)
	}
}

// read parses one reply. Error replies come back as ServerError. Arrays
// are read one level deep into c.arr; nested arrays are skipped.
func (c *conn) read() (reply, error) {
	r, err := c.readValue()
	if err != nil {
		return r, err
	}
	if r.kind == '-' {
		return r, ServerError(r.s)
	}
	c.arr = c.arr[:0]
	if r.kind == '*' {
		for i := int64(0); i < r.n; i++ {
			e, err := c.readValue()
			if err != nil {
				return r, err
			}
			if e.kind == '*' {
				if err := c.skip(e.n); err != nil {
					return r, err
				}
			}
			c.arr = append(c.arr, e)
		}
	}
	return r, nil
}

func (c *conn) skip(n int64) error {
	for i := int64(0); i < n; i++ {
		e, err := c.readValue()
		if err != nil {
			return err
		}
		if e.kind == '*' {
			if err := c.skip(e.n); err != nil {
				return err
			}
		}
	}
	return nil
}

// readValue reads one value's header, and a bulk string's body.
func (c *conn) readValue() (reply, error) {
	line, err := c.r.ReadSlice('\n')
	if err != nil {
		return reply{}, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return reply{}, fmt.Errorf("%w: bad line %q", errProtocol, line)
	}
	body := line[1 : len(line)-2]
	switch kind := line[0]; kind {
	case '+', '-':
		return reply{kind: kind, s: string(body)}, nil
	case ':', '*', '$':
		n, err := strconv.ParseInt(string(body), 10, 64)
		if err != nil {
			return reply{}, fmt.Errorf("%w: bad length %q", errProtocol, line)
		}
		if n < 0 && kind != ':' {
			return reply{}, nil // null array or bulk string
		}
		r := reply{kind: kind, n: n}
		if kind == '$' {
			b := make([]byte, n+2)
			if _, err := io.ReadFull(c.r, b); err != nil {
				return reply{}, err
			}
			r.s = string(b[:n])
		}
		return r, nil
	case '_':
		return reply{}, nil
	default:
		return reply{}, fmt.Errorf("%w: unexpected type %q", errProtocol, line)
	}
}
