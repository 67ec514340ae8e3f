package redisbridge

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"
)

// forwardDialTimeout bounds connecting to the leader.
const forwardDialTimeout = 2 * time.Second

// maxIdleForward is how many idle connections are kept per leader address.
const maxIdleForward = 32

// forwarder keeps connections to the leader (to whichever address it is
// asked for) and relays commands over them. A connection is used by one
// request at a time; a waiting acquire holds one for its whole wait.
type forwarder struct {
	mu     sync.Mutex
	idle   map[string][]*fconn
	closed bool
}

type fconn struct {
	net.Conn
	rd *bufio.Reader
}

func newForwarder() *forwarder {
	return &forwarder{idle: make(map[string][]*fconn)}
}

// roundTrip sends raw to addr and returns the single reply. sent reports
// whether the command may have reached the leader: after that, a failure
// leaves its outcome unknown.
func (f *forwarder) roundTrip(ctx context.Context, addr string, raw []byte) (reply []byte, sent bool, err error) {
	fc, err := f.get(ctx, addr)
	if err != nil {
		return nil, false, err
	}
	// Cancelling ctx (the client hung up, the server is closing) unblocks
	// the read; the connection is then closed, which the leader sees as a
	// hang-up of its own.
	stop := context.AfterFunc(ctx, func() { _ = fc.SetDeadline(time.Unix(1, 0)) })
	if dl, ok := ctx.Deadline(); ok {
		_ = fc.SetDeadline(dl)
	}
	if _, err := fc.Write(raw); err != nil {
		stop()
		_ = fc.Close()
		return nil, true, err
	}
	reply, err = readReply(fc.rd)
	if !stop() || err != nil {
		_ = fc.Close()
		if err == nil {
			err = ctx.Err()
		}
		return nil, true, err
	}
	_ = fc.SetDeadline(time.Time{})
	f.put(addr, fc)
	return reply, true, nil
}

func (f *forwarder) get(ctx context.Context, addr string) (*fconn, error) {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil, errors.New("redisbridge: shutting down")
	}
	for l := f.idle[addr]; len(l) > 0; l = f.idle[addr] {
		fc := l[len(l)-1]
		f.idle[addr] = l[:len(l)-1]
		if connClosed(fc.Conn) {
			// The leader went away while this connection idled; sending on
			// it would make a clean failure look like an unknown outcome.
			_ = fc.Close()
			continue
		}
		f.mu.Unlock()
		return fc, nil
	}
	f.mu.Unlock()

	d := net.Dialer{Timeout: forwardDialTimeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	fc := &fconn{Conn: conn, rd: bufio.NewReader(conn)}
	// Mark the connection as a forwarding one, so the leader never
	// forwards what it receives on it.
	_ = fc.SetDeadline(time.Now().Add(forwardDialTimeout))
	if _, err := fc.Write(encodeCommand([]byte("FENCE.FORWARDED"))); err != nil {
		_ = fc.Close()
		return nil, err
	}
	reply, err := readReply(fc.rd)
	if err != nil || string(reply) != "+OK\r\n" {
		_ = fc.Close()
		if err == nil {
			err = fmt.Errorf("unexpected handshake reply %q", reply)
		}
		return nil, err
	}
	_ = fc.SetDeadline(time.Time{})
	return fc, nil
}

func (f *forwarder) put(addr string, fc *fconn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed || len(f.idle[addr]) >= maxIdleForward {
		_ = fc.Close()
		return
	}
	f.idle[addr] = append(f.idle[addr], fc)
}

func (f *forwarder) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	for _, l := range f.idle {
		for _, fc := range l {
			_ = fc.Close()
		}
	}
	f.idle = nil
}

// encodeCommand encodes args as a RESP array of bulk strings.
func encodeCommand(args ...[]byte) []byte {
	out := make([]byte, 0, 64)
	out = append(out, '*')
	out = strconv.AppendInt(out, int64(len(args)), 10)
	out = append(out, '\r', '\n')
	for _, a := range args {
		out = append(out, '$')
		out = strconv.AppendInt(out, int64(len(a)), 10)
		out = append(out, '\r', '\n')
		out = append(out, a...)
		out = append(out, '\r', '\n')
	}
	return out
}
