package redisbridge

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	"github.com/fencerlock/fencer/internal/resp"
)

// The guard reads each connection's bytes before redcon does. redcon's
// reader trusts the lengths a client announces: it buffers a bulk string of
// any announced size, re-parses the whole buffer on every read, and a length
// near the largest int overflows its index arithmetic and panics, which ends
// the process (found by TestHostileInput; redcon v1.6.2). The guard parses
// RESP as a stream and:
//
//   - answers malformed framing (a bad or huge count or length, a missing
//     '$' or CRLF, an inline request over 64 KiB) with Redis's
//     "ERR Protocol error: ..." and closes the connection, as Redis does;
//   - hands redcon only complete commands, at most maxCommand bytes each;
//   - drops a command with more than MaxArgs arguments, an argument longer
//     than MaxBulkLen, or more than maxCommand bytes in all, as it arrives,
//     and hands redcon a placeholder in its place, which handle() answers
//     with the limit's error: the reply stays in order and the connection
//     stays open.

const (
	// maxMultibulk and maxBulk are Redis's own protocol bounds: beyond them
	// Redis reports a protocol error and closes the connection.
	maxMultibulk = 1024 * 1024
	maxBulk      = 512 << 20
	// maxInline is Redis's PROTO_INLINE_MAX_SIZE.
	maxInline = 64 << 10
	// maxHeader bounds a "*n" or "$n" line: 19 digits, sign, CRLF.
	maxHeader = 24
	// overLimitCmd names the placeholder of a dropped command; its one
	// argument is the text of the ERR to answer. A client sending it gets
	// that ERR.
	overLimitCmd = "\x00overlimit"
)

// errProtocol is what Read returns after a framing error was answered.
var errProtocol = errors.New("redisbridge: protocol error")

type guardState int

const (
	gsStart guardState = iota
	gsInline
	gsCount
	gsBulkHeader
	gsBulkData
	gsCR
	gsLF
)

// guard is the RESP stream checker of one connection.
type guard struct {
	maxArgs, maxBulkLen, maxCommand int

	st   guardState
	line []byte // the header line being read
	held []byte // the current command, handed over once complete
	size int    // raw bytes of the current command
	left int    // arguments still to come
	need int    // bulk bytes still to come
	over string // the limit error of a command being dropped
	out  []byte // complete commands for redcon
}

// feed checks p and appends what redcon may read to g.out. It returns the
// protocol error's text for a framing error.
func (g *guard) feed(p []byte) string {
	for i := 0; i < len(p); {
		switch g.st {
		case gsStart:
			g.line, g.held, g.size, g.over = g.line[:0], g.held[:0], 0, ""
			if p[i] == '*' {
				g.st = gsCount
			} else {
				g.st = gsInline
			}
		case gsInline:
			j := i
			for j < len(p) && p[j] != '\n' {
				j++
			}
			end := j
			if j < len(p) {
				end++
				g.st = gsStart
			}
			if g.size += end - i; g.size > maxInline {
				return "too big inline request"
			}
			g.out = append(g.out, p[i:end]...)
			i = end
		case gsCount, gsBulkHeader:
			b := p[i]
			i++
			if g.st == gsBulkHeader && len(g.line) == 0 && b != '$' {
				return fmt.Sprintf("expected '$', got '%s'", truncate([]byte{b}, 1))
			}
			g.line = append(g.line, b)
			if msg := g.header(b); msg != "" {
				return msg
			}
		case gsBulkData:
			k := min(g.need, len(p)-i)
			g.keep(p[i : i+k])
			g.need -= k
			i += k
			if g.need == 0 {
				g.st = gsCR
			}
		case gsCR, gsLF:
			want := byte('\r')
			if g.st == gsLF {
				want = '\n'
			}
			if p[i] != want {
				return "invalid bulk length"
			}
			g.keep(p[i : i+1])
			i++
			if g.st == gsCR {
				g.st = gsLF
				continue
			}
			g.st = gsBulkHeader
			if g.left--; g.left == 0 {
				g.complete()
			}
		}
	}
	return ""
}

// header takes one byte of a "*n" or "$n" line.
func (g *guard) header(b byte) string {
	bad := "invalid bulk length"
	if g.st == gsCount {
		bad = "invalid multibulk length"
	}
	if len(g.line) > maxHeader {
		return bad
	}
	if b != '\n' {
		return ""
	}
	n, ok := parseLen(g.line)
	if !ok {
		return bad
	}
	g.size += len(g.line)
	if g.st == gsCount {
		if n <= 0 || n > maxMultibulk {
			return bad
		}
		g.left, g.st = n, gsBulkHeader
		if n > g.maxArgs {
			g.over = tooManyArgs(n, g.maxArgs).Text
		}
	} else {
		if n < 0 || n > maxBulk {
			return bad
		}
		g.size += n + 2
		switch {
		case g.over != "":
		case n > g.maxBulkLen:
			g.over = argTooLong(n, g.maxBulkLen).Text
		case g.size > g.maxCommand:
			g.over = errf("command too long: more than %d bytes", g.maxCommand).Text
		}
		g.need, g.st = n, gsBulkData
		if n == 0 {
			g.st = gsCR
		}
	}
	g.keep(g.line)
	g.line = g.line[:0]
	return ""
}

// keep holds b as part of the current command unless it is being dropped.
func (g *guard) keep(b []byte) {
	if g.over == "" {
		g.held = append(g.held, b...)
	}
}

// complete hands over the command just read, or its placeholder.
func (g *guard) complete() {
	if g.over != "" {
		g.out = append(g.out, resp.AppendCommand(nil, []byte(overLimitCmd), []byte(g.over))...)
	} else {
		g.out = append(g.out, g.held...)
	}
	g.held, g.st = g.held[:0], gsStart
	if cap(g.held) > 64<<10 {
		g.held = nil // do not keep a large command's buffer for ever
	}
}

// parseLen parses "*n\r\n" or "$n\r\n" without overflow.
func parseLen(line []byte) (int, bool) {
	if len(line) < 4 || line[len(line)-2] != '\r' {
		return 0, false
	}
	digits := line[1 : len(line)-2]
	neg := digits[0] == '-'
	if neg {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 10 {
		return 0, false
	}
	n := 0
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

// guardConn is a connection whose reads go through a guard.
type guardConn struct {
	net.Conn
	g       guard
	buf     []byte
	readErr error  // the underlying read's error, once out is drained
	proto   string // a framing error to answer once out is drained
}

func (c *guardConn) Read(p []byte) (int, error) {
	for len(c.g.out) == 0 {
		switch {
		case c.proto != "":
			msg := c.proto
			c.proto = ""
			c.readErr = errProtocol
			_ = c.Conn.SetWriteDeadline(time.Now().Add(time.Second))
			_, _ = c.Conn.Write(errorLine(errf("Protocol error: %s", msg)))
			return 0, errProtocol
		case c.readErr != nil:
			return 0, c.readErr
		}
		n, err := c.Conn.Read(c.buf)
		if n > 0 {
			c.proto = c.g.feed(c.buf[:n])
		}
		if err != nil {
			c.readErr = err
		}
	}
	n := copy(p, c.g.out)
	c.g.out = c.g.out[n:]
	if len(c.g.out) == 0 {
		c.g.out = c.g.out[:0:0]
	}
	return n, nil
}

// SyscallConn exposes the socket, so that a hang-up can be watched for
// (hangup.go) through the guard.
func (c *guardConn) SyscallConn() (syscall.RawConn, error) {
	nc := c.Conn
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn() // a FIN is seen on the socket below TLS
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil, errors.New("redisbridge: connection has no socket")
	}
	return sc.SyscallConn()
}

// guardListener wraps every accepted connection in a guardConn.
type guardListener struct {
	net.Listener
	cfg *Config
}

func (l guardListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &guardConn{Conn: nc, buf: make([]byte, 16<<10), g: guard{
		maxArgs: l.cfg.MaxArgs, maxBulkLen: l.cfg.MaxBulkLen, maxCommand: 4 * l.cfg.MaxBulkLen,
	}}, nil
}
