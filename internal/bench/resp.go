package bench

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/fencerlock/fencer/internal/resp"
)

// conn is one RESP2 connection with at most one request in flight: the
// load generator's client. It writes each command from one reused buffer
// and reads replies with a resp.Reader, which reuses its memory, so that a
// client goroutine costs the server far more than it costs itself.
type conn struct {
	nc  net.Conn
	r   *resp.Reader
	buf []byte
	// key holds the lock name's bytes for AppendCommand; reused, since a
	// converted string of some length would be a new allocation each time.
	key []byte
}

// ServerError is an error reply ("-UNCERTAIN ...").
type ServerError string

func (e ServerError) Error() string { return string(e) }

// errProtocol marks a reply the client cannot parse.
var errProtocol = errors.New("bench: RESP protocol error")

// The constant arguments, as bytes once rather than converted per command.
var (
	argAcquire = []byte("FENCE.ACQUIRE")
	argRelease = []byte("FENCE.RELEASE")
	argWait    = []byte("WAIT")
)

// authCommand, if set (SetPassword), is sent on every new connection.
var authCommand []byte

// SetPassword makes every connection the package opens authenticate with
// AUTH password (a server run with --requirepass); "" turns that off. Call
// it before any run starts.
func SetPassword(password string) {
	authCommand = nil
	if password != "" {
		authCommand = resp.AppendCommand(nil, []byte("AUTH"), []byte(password))
	}
}

func dial(addr string, timeout time.Duration) (*conn, error) {
	nc, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	c := newConn(nc)
	if authCommand != nil {
		c.buf = append(c.buf[:0], authCommand...)
		v, err := c.roundTrip(time.Now().Add(timeout))
		if err == nil && v.Kind == resp.Error {
			err = ServerError(v.Str)
		}
		if err != nil {
			nc.Close()
			return nil, fmt.Errorf("bench: AUTH: %w", err)
		}
		_ = nc.SetDeadline(time.Time{})
	}
	return c, nil
}

func newConn(nc net.Conn) *conn {
	return &conn{nc: nc, r: resp.NewReader(bufio.NewReaderSize(nc, 4096)), buf: make([]byte, 0, 256)}
}

func (c *conn) Close() error { return c.nc.Close() }

// roundTrip sends the command in c.buf and reads one reply, all before
// deadline (zero: none).
func (c *conn) roundTrip(deadline time.Time) (*resp.Value, error) {
	if err := c.nc.SetDeadline(deadline); err != nil {
		return nil, err
	}
	if _, err := c.nc.Write(c.buf); err != nil {
		return nil, err
	}
	return c.read()
}

// Acquire sends FENCE.ACQUIRE key owner ttl [WAIT wait]. It returns the
// token, or 0 for a null reply (not granted).
func (c *conn) Acquire(key string, owner []byte, ttl, wait time.Duration, deadline time.Time) (uint64, error) {
	var ttlDigits, waitDigits [20]byte
	c.key = append(c.key[:0], key...)
	args := [6][]byte{argAcquire, c.key, owner, strconv.AppendInt(ttlDigits[:0], ttl.Milliseconds(), 10)}
	n := 4
	if wait > 0 {
		args[4], args[5] = argWait, strconv.AppendInt(waitDigits[:0], max(wait.Milliseconds(), 1), 10)
		n = 6
	}
	c.buf = resp.AppendCommand(c.buf[:0], args[:n]...)
	r, err := c.roundTrip(deadline)
	if err != nil {
		return 0, err
	}
	switch {
	case r.IsNull:
		return 0, nil
	case r.Kind == resp.Array && len(r.Elems) == 2 && r.Elems[0].Kind == resp.Integer && r.Elems[0].Int > 0:
		return uint64(r.Elems[0].Int), nil
	}
	return 0, fmt.Errorf("%w: FENCE.ACQUIRE answered %s", errProtocol, describe(r))
}

// Release sends FENCE.RELEASE key owner and returns the integer reply.
func (c *conn) Release(key string, owner []byte, deadline time.Time) (int64, error) {
	c.key = append(c.key[:0], key...)
	c.buf = resp.AppendCommand(c.buf[:0], argRelease, c.key, owner)
	r, err := c.roundTrip(deadline)
	if err != nil {
		return 0, err
	}
	if r.Kind != resp.Integer {
		return 0, fmt.Errorf("%w: FENCE.RELEASE answered %s", errProtocol, describe(r))
	}
	return r.Int, nil
}

// Do sends any command of string arguments and returns the reply, which
// is good until the next command on c.
func (c *conn) Do(deadline time.Time, args ...string) (*resp.Value, error) {
	b := make([][]byte, len(args))
	for i, a := range args {
		b[i] = []byte(a)
	}
	c.buf = resp.AppendCommand(c.buf[:0], b...)
	return c.roundTrip(deadline)
}

func describe(r *resp.Value) string {
	switch {
	case r.IsNull:
		return "null"
	case r.Kind == resp.Integer:
		return "integer " + strconv.FormatInt(r.Int, 10)
	case r.Kind == resp.Array:
		return fmt.Sprintf("an array of %d", len(r.Elems))
	default:
		return strconv.Quote(r.Str)
	}
}

// read reads one reply. Error replies come back as ServerError, replies
// that are not RESP as errProtocol.
func (c *conn) read() (*resp.Value, error) {
	r, err := c.r.ReadValue()
	if errors.Is(err, resp.ErrMalformed) {
		return nil, fmt.Errorf("%w: %w", errProtocol, err)
	}
	if err != nil {
		return nil, err
	}
	if r.Kind == resp.Error || r.Kind == resp.BlobError {
		return r, ServerError(r.Str)
	}
	return r, nil
}
