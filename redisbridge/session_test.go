package redisbridge

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSessionCommands(t *testing.T) {
	addr, _ := startBridge(t, nil, nil)
	c := newClient(t, addr)

	got, err := do(t, c, "FENCE.SESSION", "OPEN", 5000)
	require.NoError(t, err)
	id := got.(int64)
	require.Positive(t, id)

	got, err = do(t, c, "FENCE.ACQUIRE", "e", "me", 0, "SESSION", id, "VALUE", "host-a")
	require.NoError(t, err)
	grant := got.([]any)
	tok := grant[0].(int64)
	assert.Equal(t, int64(0), grant[1], "no TTL of its own")
	got, err = do(t, c, "FENCE.ACQUIRE", "f", "me", 0, "SESSION", id)
	require.NoError(t, err)
	tokF := got.([]any)[0].(int64)
	_, err = do(t, c, "FENCE.ACQUIRE", "e", "you", 10000)
	assert.Equal(t, redis.Nil, err)

	got, err = do(t, c, "FENCE.HOLDER", "e")
	require.NoError(t, err)
	h := got.([]any)
	assert.Equal(t, []any{"me", tok}, h[:2])
	assert.Equal(t, id, h[3])
	assert.Equal(t, "host-a", h[4])

	got, err = do(t, c, "FENCE.PROCLAIM", "e", "me", id, "host-b")
	require.NoError(t, err)
	assert.Equal(t, int64(1), got)
	got, err = do(t, c, "FENCE.PROCLAIM", "e", "you", id, "x")
	require.NoError(t, err)
	assert.Equal(t, int64(0), got)
	got, _ = do(t, c, "FENCE.HOLDER", "e")
	assert.Equal(t, "host-b", got.([]any)[4])
	assert.Equal(t, tok, got.([]any)[1], "a proclaim keeps the token")

	got, err = do(t, c, "FENCE.SESSION", "INFO", id)
	require.NoError(t, err)
	info := got.([]any)
	assert.Equal(t, int64(5000), info[0])
	assert.InDelta(t, 5000, info[1], 1000)
	assert.Equal(t, []any{[]any{"e", "me", tok}, []any{"f", "me", tokF}}, info[2])

	got, err = do(t, c, "FENCE.SESSION", "KEEPALIVE", id)
	require.NoError(t, err)
	assert.Equal(t, int64(1), got)
	got, err = do(t, c, "FENCE.RELEASE", "f", "me", "SESSION", id)
	require.NoError(t, err)
	assert.Equal(t, int64(1), got)
	got, err = do(t, c, "FENCE.SESSION", "CLOSE", id)
	require.NoError(t, err)
	assert.Equal(t, int64(1), got)
	_, err = do(t, c, "FENCE.STATUS", "e")
	assert.Equal(t, redis.Nil, err, "closing the session released its lock")
	got, err = do(t, c, "FENCE.SESSION", "CLOSE", id)
	require.NoError(t, err)
	assert.Equal(t, int64(0), got)
	got, err = do(t, c, "FENCE.SESSION", "KEEPALIVE", id)
	require.NoError(t, err)
	assert.Equal(t, int64(0), got)
	_, err = do(t, c, "FENCE.SESSION", "INFO", id)
	assert.Equal(t, redis.Nil, err)
	_, err = do(t, c, "FENCE.ACQUIRE", "g", "me", 0, "SESSION", id)
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "NOSESSION "), err.Error())
}

func TestSessionBadRequests(t *testing.T) {
	addr, _ := startBridge(t, nil, nil)
	c := newClient(t, addr)
	for _, tc := range []struct {
		args []any
		want string
	}{
		{[]any{"FENCE.SESSION", "OPEN"}, "ERR wrong number of arguments for 'fence.session' command"},
		{[]any{"FENCE.SESSION", "OPEN", "x"}, "ERR invalid argument: ttl: want a whole number of milliseconds, got 'x'"},
		{[]any{"FENCE.SESSION", "OPEN", 1}, "ERR invalid argument: ttl: "},
		{[]any{"FENCE.SESSION", "NOPE", 1}, "ERR unknown subcommand 'NOPE'"},
		{[]any{"FENCE.SESSION", "CLOSE", 0}, "ERR invalid argument: session: "},
		{[]any{"FENCE.ACQUIRE", "k", "o", 1000, "SESSION", 5}, "ERR invalid argument: ttl: must be 0 under a session"},
		{[]any{"FENCE.ACQUIRE", "k", "o", 1000, "VALUE", "v"}, "ERR invalid argument: value: "},
		{[]any{"FENCE.ACQUIRE", "k", "o", 0, "SESSION"}, "ERR wrong number of arguments for 'fence.acquire' command"},
		{[]any{"FENCE.ACQUIRE", "k", "o", 0, "SESSION", "x"}, "ERR invalid argument: session: want a session ID"},
		{[]any{"FENCE.ACQUIRE", "k", "o", 1000, "WAIT", 10, "WAIT", 10}, "ERR invalid argument: option: 'WAIT' is not one here"},
		{[]any{"FENCE.RELEASE", "k", "o", "SESS", 1}, "ERR invalid argument: option: 'SESS' is not one here: want SESSION id"},
		{[]any{"FENCE.PROCLAIM", "k", "o", "x", "v"}, "ERR invalid argument: session: "},
	} {
		_, err := do(t, c, tc.args...)
		require.Error(t, err, "%v", tc.args)
		assert.True(t, strings.HasPrefix(err.Error(), tc.want), "%v: %v", tc.args, err)
	}
	got, err := do(t, c, "PING")
	require.NoError(t, err)
	assert.Equal(t, "PONG", got)
}

// A waiting acquire under a session gets the lock when its holder's session
// ends, and NOSESSION if its own session ends first.
func TestSessionWaitOverRESP(t *testing.T) {
	addr, _ := startBridge(t, nil, nil)
	c := newClient(t, addr)
	open := func() int64 {
		got, err := do(t, c, "FENCE.SESSION", "OPEN", 5000)
		require.NoError(t, err)
		return got.(int64)
	}
	a, b := open(), open()
	_, err := do(t, c, "FENCE.ACQUIRE", "k", "alice", 0, "SESSION", a)
	require.NoError(t, err)
	waiter := newClient(t, addr)
	done := make(chan error, 1)
	go func() {
		_, err := do(t, waiter, "FENCE.ACQUIRE", "k", "bob", 0, "WAIT", 10000, "SESSION", b, "VALUE", "bob's")
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	_, err = do(t, c, "FENCE.SESSION", "CLOSE", a)
	require.NoError(t, err)
	require.NoError(t, <-done)
	got, err := do(t, c, "FENCE.HOLDER", "k")
	require.NoError(t, err)
	assert.Equal(t, "bob", got.([]any)[0])
	assert.Equal(t, "bob's", got.([]any)[4])

	cSess := open()
	go func() {
		_, err := do(t, waiter, "FENCE.ACQUIRE", "k", "carol", 0, "WAIT", 10000, "SESSION", cSess)
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	_, err = do(t, c, "FENCE.SESSION", "CLOSE", cSess)
	require.NoError(t, err)
	_, err = do(t, c, "FENCE.SESSION", "CLOSE", b)
	require.NoError(t, err)
	err = <-done
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "NOSESSION "), err.Error())
}

// A keepalive counts the locks taken from the session by others.
func TestSessionKeepaliveCountsTakenLocks(t *testing.T) {
	addr, _ := startBridge(t, nil, nil)
	c := newClient(t, addr)
	got, err := do(t, c, "FENCE.SESSION", "OPEN", 5000)
	require.NoError(t, err)
	id := got.(int64)
	for _, k := range []string{"a", "b", "c"} {
		_, err := do(t, c, "FENCE.ACQUIRE", k, "me", 0, "SESSION", id)
		require.NoError(t, err)
	}
	_, err = do(t, c, "FENCE.RELEASE", "a", "me", "SESSION", id)
	require.NoError(t, err)
	got, err = do(t, c, "FENCE.SESSION", "KEEPALIVE", id)
	require.NoError(t, err)
	assert.Equal(t, int64(1), got, "a release by the holder is not a lock taken")
	_, err = do(t, c, "FENCE.REVOKE", "b")
	require.NoError(t, err)
	_, err = do(t, c, "SET", "c", "overwritten")
	require.NoError(t, err)
	got, err = do(t, c, "FENCE.SESSION", "KEEPALIVE", id)
	require.NoError(t, err)
	assert.Equal(t, int64(3), got, "1 + two locks taken")
	got, err = do(t, c, "FENCE.SESSION", "INFO", id)
	require.NoError(t, err)
	assert.Empty(t, got.([]any)[2])
}

// A user limited to app:* may not end a session that holds locks outside
// its pattern: FENCE.SESSION REVOKE needs pattern "*", and CLOSE (a
// remembered release of every lock of the session, by an ID anyone can
// guess: IDs are log positions) frees the same locks.
func TestSessionCloseRespectsKeyPatterns(t *testing.T) {
	addr := startAuth(t)
	admin := dialRaw(t, addr)
	require.Equal(t, "+OK\r\n", admin.do("AUTH", "default", "sekret"))
	open := admin.do("FENCE.SESSION", "OPEN", "10000")
	require.True(t, strings.HasPrefix(open, ":"), "%q", open)
	id := strings.TrimSpace(strings.TrimPrefix(open, ":"))
	require.True(t, strings.HasPrefix(admin.do("FENCE.ACQUIRE", "secret:1", "owner", "0", "SESSION", id), "*2\r\n"))

	alice := dialRaw(t, addr)
	require.Equal(t, "+OK\r\n", alice.do("AUTH", "alice", "apw"))
	reply := alice.do("FENCE.SESSION", "CLOSE", id)
	assert.True(t, strings.HasPrefix(reply, "-NOPERM"), "alice closed a session holding secret:1: %q", reply)
	assert.True(t, strings.HasPrefix(admin.do("FENCE.STATUS", "secret:1"), "*3\r\n"), "secret:1 was released by a user without access to it")
}

// A user limited to a pattern uses its own sessions as any user does, and
// no other user's.
func TestSessionBelongsToItsOpener(t *testing.T) {
	addr := startAuth(t)
	admin := dialRaw(t, addr)
	require.Equal(t, "+OK\r\n", admin.do("AUTH", "default", "sekret"))
	adminSession := strings.TrimSpace(strings.TrimPrefix(admin.do("FENCE.SESSION", "OPEN", "10000"), ":"))

	alice := dialRaw(t, addr)
	require.Equal(t, "+OK\r\n", alice.do("AUTH", "alice", "apw"))
	open := alice.do("FENCE.SESSION", "OPEN", "10000")
	require.True(t, strings.HasPrefix(open, ":"), "%q", open)
	mine := strings.TrimSpace(strings.TrimPrefix(open, ":"))
	assert.True(t, strings.HasPrefix(alice.do("FENCE.ACQUIRE", "app:1", "a", "0", "SESSION", mine), "*2\r\n"))
	assert.Equal(t, ":1\r\n", alice.do("FENCE.SESSION", "KEEPALIVE", mine), "alive, nothing taken")
	assert.True(t, strings.HasPrefix(alice.do("FENCE.SESSION", "INFO", mine), "*3\r\n"))
	for _, args := range [][]string{
		{"FENCE.SESSION", "KEEPALIVE", adminSession},
		{"FENCE.SESSION", "INFO", adminSession},
		{"FENCE.SESSION", "CLOSE", adminSession},
		{"FENCE.ACQUIRE", "app:2", "a", "0", "SESSION", adminSession},
		{"FENCE.RELEASE", "app:2", "a", "SESSION", adminSession},
		{"FENCE.PROCLAIM", "app:2", "a", adminSession, "v"},
		{"FENCE.SESSION", "REVOKE", mine},
	} {
		reply := alice.do(args...)
		assert.True(t, strings.HasPrefix(reply, "-NOPERM"), "%v: %q", args, reply)
	}
	// The administrator may use any session.
	assert.Equal(t, ":1\r\n", admin.do("FENCE.SESSION", "CLOSE", mine))
	assert.Equal(t, ":1\r\n", admin.do("FENCE.SESSION", "CLOSE", adminSession))
}
