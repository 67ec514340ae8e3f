package redisbridge

import (
	"context"
	"errors"
	"net"
	"syscall"
	"time"
)

// hangupPoll is how often a waiting request checks its connection.
const hangupPoll = 50 * time.Millisecond

// watchHangup calls cancel when the peer closes conn, until ctx ends or stop
// is called. redcon reads a connection only between commands, so while a
// handler blocks nobody would notice the peer leave; this polls peerClosed.
func watchHangup(ctx context.Context, conn net.Conn, cancel context.CancelFunc) (stop func()) {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return func() {}
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(hangupPoll)
		defer t.Stop()
		buf := make([]byte, 1)
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			gone := peerClosed(raw, buf)
			if gone {
				cancel()
				return
			}
		}
	}()
	return func() { close(done) }
}

// peerClosed peeks at the socket without consuming anything: a zero-byte
// read is the peer's FIN (or an error), EAGAIN is a live idle peer, and
// pending bytes are a live peer too.
func peerClosed(raw syscall.RawConn, buf []byte) bool {
	var n int
	var rerr error
	cerr := raw.Read(func(fd uintptr) bool {
		n, _, rerr = syscall.Recvfrom(int(fd), buf, syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true
	})
	return cerr != nil || (rerr == nil && n == 0) ||
		(rerr != nil && !errors.Is(rerr, syscall.EAGAIN) && !errors.Is(rerr, syscall.EINTR))
}

// connClosed reports whether conn's peer has closed it. A connection that
// cannot be inspected is taken as open.
func connClosed(conn net.Conn) bool {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	return peerClosed(raw, make([]byte, 1))
}
