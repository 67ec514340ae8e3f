package redisbridge

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"slices"
	"sync"
	"syscall"
	"time"
)

// hangupPoll is how often the connections of waiting requests are checked.
const hangupPoll = 50 * time.Millisecond

// hangups watches the connections of waiting requests and cancels a
// request whose peer has closed its connection. redcon reads a connection
// only between commands, so while a handler blocks nobody else would notice
// the peer leave.
//
// One goroutine serves all of them, and only while there are any: every
// hangupPoll it asks the kernel about all their sockets at once (poll(2)
// where the platform can tell a peer's FIN that way, hangup_linux.go), and
// peeks only at those it flags (a TLS connection's FIN needs no peek: see
// hangupWatch.tls). A goroutine and a ticker per waiting
// request instead cost a thread wake-up per waiter per tick, which with
// hundreds of waiters took a share of fencerd's CPU that one poll does not
// (docs/performance-log.md, What changed in the server).
type hangups struct {
	mu      sync.Mutex
	watched map[*hangupWatch]struct{}
	running bool
}

type hangupWatch struct {
	raw    syscall.RawConn
	cancel context.CancelFunc
	// tls: a FIN ends the client even with bytes pending in front of it,
	// since a TLS client that closes sends a close_notify alert first,
	// which would otherwise look like a pipelined command.
	tls bool
}

// What one poll says about a socket.
const (
	sockQuiet   = iota // nothing happened
	sockSuspect        // something may have: peek to tell
	sockFIN            // the peer sent its FIN, maybe after bytes still unread
)

// watch calls cancel when the peer closes conn, until stop is called. A
// connection that cannot be inspected is not watched.
func (h *hangups) watch(conn net.Conn, cancel context.CancelFunc) (stop func()) {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return func() {}
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return func() {}
	}
	w := &hangupWatch{raw: raw, cancel: cancel, tls: isTLS(conn)}
	h.mu.Lock()
	if h.watched == nil {
		h.watched = make(map[*hangupWatch]struct{})
	}
	h.watched[w] = struct{}{}
	if !h.running {
		h.running = true
		go h.loop()
	}
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		delete(h.watched, w)
		h.mu.Unlock()
	}
}

// loop checks the watched connections every hangupPoll and returns once
// none is left.
func (h *hangups) loop() {
	t := time.NewTicker(hangupPoll)
	defer t.Stop()
	var (
		ws    []*hangupWatch
		fds   []int
		state []int
		buf   = make([]byte, 1)
	)
	for range t.C {
		h.mu.Lock()
		if len(h.watched) == 0 {
			h.running = false
			h.mu.Unlock()
			return
		}
		ws = ws[:0]
		for w := range h.watched {
			ws = append(ws, w)
		}
		h.mu.Unlock()

		fds = fds[:0]
		for _, w := range ws {
			fd := -1 // stays -1 if the connection is closed: suspect
			_ = w.raw.Control(func(f uintptr) { fd = int(f) })
			fds = append(fds, fd)
		}
		state = slices.Grow(state[:0], len(fds))[:len(fds)]
		clear(state)
		// A stop racing this poll may let its socket's descriptor be
		// closed and reused; poll then looks at another socket. What it
		// says is taken for this watch's connection only, which is closed
		// by then (so its request is over, or ending), and peerClosed goes
		// through the connection itself: no other request is cancelled.
		pollSockets(fds, state)
		for i, w := range ws {
			switch {
			case state[i] == sockFIN && w.tls:
			case state[i] != sockQuiet && peerClosed(w.raw, buf):
			default:
				continue
			}
			h.mu.Lock()
			_, still := h.watched[w]
			delete(h.watched, w)
			h.mu.Unlock()
			if still {
				w.cancel()
			}
		}
		clear(ws)
	}
}

// peerClosed peeks at the socket without consuming anything: a zero-byte
// read is the peer's FIN (or an error), EAGAIN is a live idle peer, and
// pending bytes are a live peer too. It peeks through Control, not Read: a
// Read fails once the connection's read deadline (redcon's idle timeout,
// set before the command that now waits) has passed, and a client waiting
// for a lock is not idle.
func peerClosed(raw syscall.RawConn, buf []byte) bool {
	var n int
	var rerr error
	cerr := raw.Control(func(fd uintptr) {
		n, _, rerr = syscall.Recvfrom(int(fd), buf, syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
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

// isTLS reports whether conn carries TLS (directly or under the guard).
func isTLS(conn net.Conn) bool {
	if g, ok := conn.(*guardConn); ok {
		conn = g.Conn
	}
	_, ok := conn.(*tls.Conn)
	return ok
}
