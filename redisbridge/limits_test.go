package redisbridge

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/fencerlock/fencer/internal/resp"
	"github.com/fencerlock/fencer/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// assertClosed asserts the server closes c within 5s, after any replies.
func assertClosed(t *testing.T, c net.Conn) {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err := io.Copy(io.Discard, c)
	assert.NoError(t, err, "the server closes the connection (EOF), not the read deadline")
}

func TestTooManyArgumentsKeepsTheConnection(t *testing.T) {
	addr, _ := startBridge(t, nil, func(c *Config) { c.MaxArgs = 6 })
	rc := dialRaw(t, addr)
	assert.Equal(t, "-ERR too many arguments: 7, at most 6 per command\r\n", rc.do("DEL", "a", "b", "c", "d", "e", "f"))
	assert.Equal(t, "+OK\r\n", rc.do("SET", "k", "v", "NX", "PX", "5000"), "six arguments are served")
	assert.Equal(t, "$1\r\nv\r\n", rc.do("GET", "k"))
}

func TestTooLongArgumentKeepsTheConnection(t *testing.T) {
	addr, _ := startBridge(t, nil, func(c *Config) { c.MaxBulkLen = 64 })
	rc := dialRaw(t, addr)
	assert.Equal(t, "+OK\r\n", rc.do("SET", "k", strings.Repeat("v", 64), "NX", "PX", "5000"))
	assert.Equal(t, "-ERR argument too long: 65 bytes, at most 64\r\n", rc.do("SET", "k2", strings.Repeat("v", 65), "NX", "PX", "5000"))
	assert.Equal(t, "$-1\r\n", rc.do("GET", "k2"), "nothing was taken")
	assert.Equal(t, "$64\r\n"+strings.Repeat("v", 64)+"\r\n", rc.do("GET", "k"), "earlier data intact")
}

func TestTooManyClientsRefusesOnlyTheNewOne(t *testing.T) {
	addr, _ := startBridge(t, nil, func(c *Config) { c.MaxClients = 2 })
	a, b := dialRaw(t, addr), dialRaw(t, addr)
	assert.Equal(t, "+PONG\r\n", a.do("PING"))
	assert.Equal(t, "+PONG\r\n", b.do("PING"))

	third, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer third.Close()
	require.NoError(t, third.SetReadDeadline(time.Now().Add(5*time.Second)))
	reply, err := resp.ReadRaw(bufio.NewReader(third))
	require.NoError(t, err)
	assert.Equal(t, "-ERR max number of clients reached\r\n", string(reply))
	assertClosed(t, third)

	assert.Equal(t, "+PONG\r\n", a.do("PING"), "the others keep being served")
	// Once one leaves, a new client gets its place.
	require.NoError(t, b.c.Close())
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return false
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write(resp.Command("PING")); err != nil {
			return false
		}
		reply, err := resp.ReadRaw(bufio.NewReader(c))
		return err == nil && string(reply) == "+PONG\r\n"
	}, 10*time.Second, 50*time.Millisecond)
}

func TestPipelineBeyondTheLimitIsRefusedPerCommand(t *testing.T) {
	addr, _ := startBridge(t, nil, func(c *Config) { c.MaxPipeline = 3 })
	rc := dialRaw(t, addr)
	// One write of ten commands arrives in one read on loopback.
	_, err := rc.c.Write(bytes.Repeat(resp.Command("PING"), 10))
	require.NoError(t, err)
	for i := range 10 {
		if i < 3 {
			assert.Equal(t, "+PONG\r\n", rc.read(), "command %d", i)
		} else {
			assert.Equal(t, "-ERR too many pipelined commands: at most 3 per read are served, resend the rest\r\n", rc.read(), "command %d", i)
		}
	}
	assert.Equal(t, "+PONG\r\n", rc.do("PING"), "the next read is served")
}

func TestIdleConnectionIsClosed(t *testing.T) {
	addr, _ := startBridge(t, nil, func(c *Config) { c.IdleTimeout = 200 * time.Millisecond })
	rc := dialRaw(t, addr)
	assert.Equal(t, "+PONG\r\n", rc.do("PING"))
	start := time.Now()
	assertClosed(t, rc.c)
	assert.GreaterOrEqual(t, time.Since(start), 100*time.Millisecond, "not closed before the timeout")
	assert.Equal(t, "+PONG\r\n", dialRaw(t, addr).do("PING"), "new connections are served")
}

func TestLockTableLimit(t *testing.T) {
	addr, _ := startBridge(t, func(c *server.Config) { c.MaxLocks = 2 }, nil)
	rc := dialRaw(t, addr)
	a := rc.do("FENCE.ACQUIRE", "a", "me", "10000")
	require.True(t, strings.HasPrefix(a, "*2\r\n"), "%q", a)
	require.True(t, strings.HasPrefix(rc.do("FENCE.ACQUIRE", "b", "me", "10000"), "*2\r\n"))
	assert.Equal(t, "-ERR limit reached: the lock table holds its maximum of 2 locks\r\n", rc.do("FENCE.ACQUIRE", "c", "me", "10000"))
	assert.Equal(t, "-ERR limit reached: the lock table holds its maximum of 2 locks\r\n", rc.do("SET", "c", "v", "NX", "PX", "10000"))
	assert.Equal(t, a, rc.do("FENCE.ACQUIRE", "a", "me", "10000"), "a held lock is still renewed")
	assert.Equal(t, ":1\r\n", rc.do("FENCE.RELEASE", "a", "me"))
	assert.True(t, strings.HasPrefix(rc.do("FENCE.ACQUIRE", "c", "me", "10000"), "*2\r\n"), "a freed place is given")
	assert.True(t, strings.HasPrefix(rc.do("FENCE.STATUS", "b"), "*3\r\n$2\r\nme\r\n"), "b is still held")
}

// A user's lock limit (maxlocks in the users file) is answered as a limit
// error, through the native commands and Redlock's SET alike, and leaves
// other users' locks alone.
func TestUserLockLimit(t *testing.T) {
	alice := NewUser("alice", "apw", "app:*")
	alice.MaxLocks = 1
	addr, _ := startBridge(t, func(c *server.Config) {
		c.Quotas = []server.Quota{{Name: "user alice", Pattern: alice.Pattern, Max: alice.MaxLocks}}
	}, func(c *Config) {
		c.Users = []User{alice, NewUser("node", "npw", "*")}
		c.ForwardUser = "node"
	})
	rc := dialRaw(t, addr)
	require.Equal(t, "+OK\r\n", rc.do("AUTH", "alice", "apw"))
	require.True(t, strings.HasPrefix(rc.do("FENCE.ACQUIRE", "app:1", "me", "10000"), "*2\r\n"))
	want := "-ERR limit reached: user alice may hold at most 1 locks (names matching \"app:*\")\r\n"
	assert.Equal(t, want, rc.do("FENCE.ACQUIRE", "app:2", "me", "10000"))
	assert.Equal(t, want, rc.do("SET", "app:2", "v", "NX", "PX", "10000"))
	assert.Equal(t, "+PONG\r\n", rc.do("PING"), "the connection stays usable")

	admin := dialRaw(t, addr)
	require.Equal(t, "+OK\r\n", admin.do("AUTH", "node", "npw"))
	assert.True(t, strings.HasPrefix(admin.do("FENCE.ACQUIRE", "other", "me", "10000"), "*2\r\n"), "names outside the pattern are not counted")
	assert.Equal(t, ":1\r\n", rc.do("FENCE.RELEASE", "app:1", "me"))
	assert.True(t, strings.HasPrefix(rc.do("FENCE.ACQUIRE", "app:2", "me", "10000"), "*2\r\n"), "a freed place is given")
}
