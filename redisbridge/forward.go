package redisbridge

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/fencerlock/fencer/internal/resp"
)

// forwardDialTimeout bounds connecting to the leader.
const forwardDialTimeout = 2 * time.Second

// maxIdleForward is how many idle connections are kept per leader address.
const maxIdleForward = 32

// forwarder keeps connections to the leader (to whichever address it is
// asked for) and relays commands over them. A connection is used by one
// request at a time; a waiting acquire holds one for its whole wait.
//
// There is one pool per address and RESP version: a command from a client
// that said HELLO 3 goes over a connection that said HELLO 3 too, so that
// the leader's reply, relayed as it is, is in the client's protocol.
type forwarder struct {
	mu     sync.Mutex
	idle   map[poolKey][]*fconn
	closed bool
	// auth, if set, is the AUTH command a new connection sends first.
	auth []byte
	// tls, if set, makes new connections TLS.
	tls *tls.Config
	// olds are the leaders that did not know FENCE.ONBEHALFCLIENT, until
	// when to send them the older form.
	olds map[string]time.Time
}

// old reports whether addr is a leader to send the older form.
func (f *forwarder) old(addr string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return time.Now().Before(f.olds[addr])
}

// markOld notes that addr did not know FENCE.ONBEHALFCLIENT.
func (f *forwarder) markOld(addr string, until time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.olds == nil {
		f.olds = make(map[string]time.Time)
	}
	f.olds[addr] = until
}

// poolKey names one pool of forwarding connections.
type poolKey struct {
	addr  string
	proto int
}

type fconn struct {
	net.Conn
	rd *bufio.Reader
}

func newForwarder(auth []byte, tlsCfg *tls.Config) *forwarder {
	return &forwarder{idle: make(map[poolKey][]*fconn), auth: auth, tls: tlsCfg}
}

// roundTrip sends raw to addr over a connection speaking RESP version proto
// and returns the single reply. sent reports whether the command may have
// reached the leader: after that, a failure leaves its outcome unknown.
func (f *forwarder) roundTrip(ctx context.Context, addr string, proto int, raw []byte) (reply []byte, sent bool, err error) {
	pk := poolKey{addr: addr, proto: proto}
	fc, err := f.get(ctx, pk)
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
	reply, err = resp.ReadRaw(fc.rd)
	if !stop() || err != nil {
		_ = fc.Close()
		if err == nil {
			err = ctx.Err()
		}
		return nil, true, err
	}
	_ = fc.SetDeadline(time.Time{})
	f.put(pk, fc)
	return reply, true, nil
}

func (f *forwarder) get(ctx context.Context, pk poolKey) (*fconn, error) {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil, errors.New("redisbridge: shutting down")
	}
	for l := f.idle[pk]; len(l) > 0; l = f.idle[pk] {
		fc := l[len(l)-1]
		f.idle[pk] = l[:len(l)-1]
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

	conn, err := dialNode(ctx, pk.addr, f.tls)
	if err != nil {
		return nil, err
	}
	fc := &fconn{Conn: conn, rd: bufio.NewReader(conn)}
	// Mark the connection as a forwarding one, so the leader never
	// forwards what it receives on it; then switch it to the client's
	// protocol.
	_ = fc.SetDeadline(time.Now().Add(forwardDialTimeout))
	if f.auth != nil {
		if err := fc.handshake(f.auth, "+OK\r\n"); err != nil {
			_ = fc.Close()
			return nil, err
		}
	}
	if err := fc.handshake(resp.AppendCommand(nil, []byte("FENCE.FORWARDED")), "+OK\r\n"); err != nil {
		_ = fc.Close()
		return nil, err
	}
	if pk.proto == 3 {
		if err := fc.handshake(resp.AppendCommand(nil, []byte("HELLO"), []byte("3")), "%"); err != nil {
			_ = fc.Close()
			return nil, err
		}
	}
	_ = fc.SetDeadline(time.Time{})
	return fc, nil
}

// dialNode connects to another node's client port, over TLS if tlsCfg is
// set.
func dialNode(ctx context.Context, addr string, tlsCfg *tls.Config) (net.Conn, error) {
	d := net.Dialer{Timeout: forwardDialTimeout}
	if tlsCfg != nil {
		td := tls.Dialer{NetDialer: &d, Config: tlsCfg}
		return td.DialContext(ctx, "tcp", addr)
	}
	return d.DialContext(ctx, "tcp", addr)
}

// handshake sends cmd and checks that the reply starts with want.
func (fc *fconn) handshake(cmd []byte, want string) error {
	if _, err := fc.Write(cmd); err != nil {
		return err
	}
	reply, err := resp.ReadRaw(fc.rd)
	if err != nil {
		return err
	}
	if !strings.HasPrefix(string(reply), want) {
		return fmt.Errorf("unexpected handshake reply %q", reply)
	}
	return nil
}

func (f *forwarder) put(pk poolKey, fc *fconn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed || len(f.idle[pk]) >= maxIdleForward {
		_ = fc.Close()
		return
	}
	f.idle[pk] = append(f.idle[pk], fc)
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
