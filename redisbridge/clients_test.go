package redisbridge

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencerlock/fencer/internal/resp"
	"github.com/tidwall/redcon"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// clientField is the "client" of a FENCE.LOCKS holder as RESP2 writes it.
func clientField(user, addr, name string) string {
	b := func(s string) string { return fmt.Sprintf("$%d\r\n%s\r\n", len(s), s) }
	return b("client") + "*6\r\n" + b("user") + b(user) + b("addr") + b(addr) + b("name") + b(name)
}

const noClient = "$6\r\nclient\r\n$-1\r\n"

// FENCE.LOCKS shows, beside each holder, the user, address and CLIENT
// SETNAME of the connection whose acquire took it; a Redis write's holder
// has none (null).
func TestLocksShowTheHoldersClient(t *testing.T) {
	addr, _ := startBridge(t, nil, nil)
	w := dialRaw(t, addr)
	require.Equal(t, "+OK\r\n", w.do("CLIENT", "SETNAME", "worker-1"))
	require.True(t, strings.HasPrefix(w.do("FENCE.ACQUIRE", "job:1", "alice", "60000"), "*2\r\n"))
	s := dialRaw(t, addr)
	require.True(t, strings.HasPrefix(s.do("FENCE.SEMACQUIRE", "job:2", "bob", "60000", "3"), "*"))
	require.Equal(t, "+OK\r\n", s.do("SET", "job:3", "v", "NX", "PX", "60000"))

	admin := dialRaw(t, addr)
	got := admin.do("FENCE.LOCKS", "PREFIX", "job:")
	assert.Contains(t, got, "$5\r\nalice\r\n")
	assert.Contains(t, got, clientField("default", w.c.LocalAddr().String(), "worker-1"), "job:1's client")
	assert.Contains(t, got, clientField("default", s.c.LocalAddr().String(), ""), "job:2's permit's client")
	assert.Equal(t, 1, strings.Count(got, noClient), "job:3, a Redis SET, has no record: %q", got)

	// Released and taken by another connection: the new grant's client.
	require.Equal(t, ":1\r\n", w.do("FENCE.RELEASE", "job:1", "alice"))
	require.True(t, strings.HasPrefix(s.do("FENCE.ACQUIRE", "job:1", "carol", "60000"), "*2\r\n"))
	got = admin.do("FENCE.LOCKS", "PREFIX", "job:1")
	assert.Contains(t, got, clientField("default", s.c.LocalAddr().String(), ""))
	assert.NotContains(t, got, "worker-1")

	// RESP3: a map, and null as RESP3's.
	r3 := dialRaw(t, addr)
	require.True(t, strings.HasPrefix(r3.do("HELLO", "3"), "%"))
	got = r3.do("FENCE.LOCKS", "PREFIX", "job:3")
	assert.Contains(t, got, "$6\r\nclient\r\n_\r\n")
	got = r3.do("FENCE.LOCKS", "PREFIX", "job:1")
	assert.Contains(t, got, "$6\r\nclient\r\n%3\r\n$4\r\nuser\r\n$7\r\ndefault\r\n")
}

// Through a follower: the leader records the client the follower served
// (its user, its address as the follower saw it, its name), not the
// forwarding connection's. A command an older follower forwards without
// naming its client (FENCE.ONBEHALF) is recorded as unknown, never as the
// follower's connection.
func TestLocksShowTheClientThroughAFollower(t *testing.T) {
	leader, laddr := startAuthNode(t, false)
	require.Eventually(t, func() bool { id, _ := leader.Leader(); return id == leader.ID() }, 10*time.Second, 20*time.Millisecond)
	follower, faddr := startAuthNode(t, true)
	require.NoError(t, leader.Join(t.Context(), follower.ID(), follower.RaftAddr(), faddr))
	require.Eventually(t, func() bool { id, _ := follower.Leader(); return id == leader.ID() }, 10*time.Second, 20*time.Millisecond)

	rc := dialRaw(t, faddr)
	require.Equal(t, "+OK\r\n", rc.do("AUTH", "alice", "apw"))
	require.Equal(t, "+OK\r\n", rc.do("CLIENT", "SETNAME", "billing-worker"))
	require.True(t, strings.HasPrefix(rc.do("FENCE.ACQUIRE", "app:1", "me", "60000", "WAIT", "1000"), "*2\r\n:"))

	old := dialRaw(t, laddr)
	require.Equal(t, "+OK\r\n", old.do("AUTH", "default", "sekret"))
	require.Equal(t, "+OK\r\n", old.do("FENCE.FORWARDED"))
	require.True(t, strings.HasPrefix(old.do("FENCE.ONBEHALF", "alice", "app:*", "FENCE.ACQUIRE", "app:2", "me", "60000"), "*2\r\n:"))

	admin := dialRaw(t, laddr)
	require.Equal(t, "+OK\r\n", admin.do("AUTH", "default", "sekret"))
	got := admin.do("FENCE.LOCKS", "PREFIX", "app:1")
	assert.Contains(t, got, clientField("alice", rc.c.LocalAddr().String(), "billing-worker"))
	got = admin.do("FENCE.LOCKS", "PREFIX", "app:2")
	assert.Contains(t, got, noClient)
	assert.NotContains(t, got, old.c.LocalAddr().String())

	// FENCE.ONBEHALFCLIENT only on a forwarding connection, as an admin.
	alice := dialRaw(t, laddr)
	require.Equal(t, "+OK\r\n", alice.do("AUTH", "alice", "apw"))
	assert.Contains(t, alice.do("FENCE.ONBEHALFCLIENT", "alice", "app:*", "1.2.3.4:5", "x", "FENCE.ACQUIRE", "app:3", "me", "60000"), "-NOPERM")
	assert.Contains(t, admin.do("FENCE.ONBEHALFCLIENT", "alice", "app:*", "1.2.3.4:5", "x", "FENCE.ACQUIRE", "app:3", "me", "60000"),
		"FENCE.ONBEHALFCLIENT is sent only by a node forwarding a request")
}

// stubConn is a client connection as a request sees it, with only its
// address: forward reads nothing else of it.
type stubConn struct {
	redcon.Conn
	addr string
}

func (s stubConn) RemoteAddr() string { return s.addr }

// A leader older than FENCE.ONBEHALFCLIENT refuses it as an unknown
// command, having run nothing; the follower then forwards FENCE.ONBEHALF,
// and goes on doing so for that leader for a while. The older leader is a
// fake that answers as one does (an older binary is not at hand here): it
// records each command and refuses FENCE.ONBEHALFCLIENT in the older
// leader's words.
func TestForwardFallsBackForAnOlderLeader(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	var mu sync.Mutex
	var seen []string
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				rd := bufio.NewReader(c)
				for {
					v, err := resp.ReadValue(rd)
					if err != nil {
						return
					}
					name := v.Elems[0].Str
					mu.Lock()
					seen = append(seen, name)
					mu.Unlock()
					reply := "+OK\r\n"
					if strings.EqualFold(name, "FENCE.ONBEHALFCLIENT") {
						reply = "-ERR unknown command 'FENCE.ONBEHALFCLIENT', with args beginning with: 'alice' 'app:*' \r\n"
					}
					_, _ = c.Write([]byte(reply))
				}
			}()
		}
	}()
	b := &Bridge{fwd: newForwarder(nil, nil)}
	defer b.fwd.close()
	r := &request{c: stubConn{addr: "10.0.0.9:1234"}, conn: &connState{proto: 2, user: &User{Name: "alice", Pattern: "app:*"}}}
	args := [][]byte{[]byte("FENCE.ACQUIRE"), []byte("app:1"), []byte("me"), []byte("1000")}
	raw := resp.AppendCommand(nil, args...)
	for range 2 {
		reply, sent, err := b.forward(t.Context(), ln.Addr().String(), r, raw, args)
		require.NoError(t, err)
		assert.True(t, sent)
		assert.Equal(t, "+OK\r\n", string(reply))
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"FENCE.FORWARDED", "FENCE.ONBEHALFCLIENT", "FENCE.ONBEHALF", "FENCE.ONBEHALF"}, seen)
}
