package redisbridge

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// loopbackPairs returns n connected pairs of real TCP connections: the
// server's end of each, and the client's.
func loopbackPairs(t *testing.T, n int) (servers, clients []net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	for i := 0; i < n; i++ {
		c, err := net.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		s, err := ln.Accept()
		require.NoError(t, err)
		servers = append(servers, s)
		clients = append(clients, c)
		t.Cleanup(func() { _ = c.Close(); _ = s.Close() })
	}
	return servers, clients
}

// One watcher serves many waiting connections: each peer that hangs up
// cancels its own request and no other; a live peer, idle or with a command
// pipelined behind the wait (even if it then half-closed), is not
// cancelled; the watcher's goroutine ends once nothing is watched, and
// starts again for the next wait.
func TestHangupsCancelOnlyTheConnectionsWhosePeerLeft(t *testing.T) {
	const n = 64
	servers, clients := loopbackPairs(t, n)
	var h hangups
	ctxs := make([]context.Context, n)
	stops := make([]func(), n)
	for i := range servers {
		var cancel context.CancelFunc
		ctxs[i], cancel = context.WithCancel(context.Background())
		t.Cleanup(cancel)
		stops[i] = h.watch(servers[i], cancel)
	}
	// Every third peer hangs up (one with a reset instead of a FIN); every
	// fifth of the others sends bytes and stays; every seventh of the rest
	// sends bytes and half-closes, and stays too (not over TLS:
	// TestTLSHangupLeavesTheQueue).
	gone := map[int]bool{}
	for i := range clients {
		switch {
		case i == 0:
			require.NoError(t, clients[i].(*net.TCPConn).SetLinger(0))
			require.NoError(t, clients[i].Close())
			gone[i] = true
		case i%3 == 0:
			require.NoError(t, clients[i].Close())
			gone[i] = true
		case i%5 == 0:
			_, err := clients[i].Write([]byte("PING\r\n"))
			require.NoError(t, err)
		case i%7 == 0:
			// A command pipelined behind the wait, then a half-close: the
			// client still reads its replies.
			_, err := clients[i].Write([]byte("PING\r\n"))
			require.NoError(t, err)
			require.NoError(t, clients[i].(*net.TCPConn).CloseWrite())
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for i := range ctxs {
		if !gone[i] {
			continue
		}
		select {
		case <-ctxs[i].Done():
		case <-time.After(time.Until(deadline)):
			t.Fatalf("connection %d: its peer hung up and its request was not cancelled", i)
		}
	}
	// Several more polls for the live ones.
	time.Sleep(5 * hangupPoll)
	for i := range ctxs {
		if !gone[i] {
			assert.NoError(t, ctxs[i].Err(), "connection %d: live peer, request cancelled", i)
		}
	}

	for _, stop := range stops {
		stop()
	}
	require.Eventually(t, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return !h.running
	}, time.Second, 10*time.Millisecond, "the watcher's goroutine did not end with nothing to watch")

	// A stopped watch is not cancelled when its peer leaves afterwards, and
	// a new watch starts the goroutine again.
	late, lateCancel := context.WithCancel(context.Background())
	defer lateCancel()
	stop := h.watch(servers[1], lateCancel)
	stop()
	fresh, freshCancel := context.WithCancel(context.Background())
	defer freshCancel()
	defer h.watch(servers[2], freshCancel)()
	require.NoError(t, clients[1].Close())
	require.NoError(t, clients[2].Close())
	select {
	case <-fresh.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a watch after the goroutine ended was not served")
	}
	assert.NoError(t, late.Err(), "a stopped watch was cancelled")
}

// A connection already closed on this side counts as gone.
func TestHangupsCancelAClosedConnection(t *testing.T) {
	servers, _ := loopbackPairs(t, 1)
	var h hangups
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer h.watch(servers[0], cancel)()
	require.NoError(t, servers[0].Close())
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a closed connection's request was not cancelled")
	}
}

// A waiting client whose connection's read deadline (the idle timeout redcon
// set before the command that waits) has passed is still there.
func TestPeerClosedIgnoresTheReadDeadline(t *testing.T) {
	servers, clients := loopbackPairs(t, 2)
	require.NoError(t, servers[0].SetReadDeadline(time.Now().Add(-time.Second)))
	raw, err := servers[0].(*net.TCPConn).SyscallConn()
	require.NoError(t, err)
	assert.False(t, peerClosed(raw, make([]byte, 1)), "live peer past the read deadline taken for gone")

	require.NoError(t, servers[1].SetReadDeadline(time.Now().Add(-time.Second)))
	require.NoError(t, clients[1].Close())
	raw, err = servers[1].(*net.TCPConn).SyscallConn()
	require.NoError(t, err)
	require.Eventually(t, func() bool { return peerClosed(raw, make([]byte, 1)) }, 5*time.Second, 10*time.Millisecond,
		"a peer that left was not seen past the read deadline")
}
