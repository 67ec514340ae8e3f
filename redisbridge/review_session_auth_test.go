package redisbridge

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
