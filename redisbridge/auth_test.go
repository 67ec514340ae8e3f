package redisbridge

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencerlock/fencer/internal/resp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func startAuth(t *testing.T) string {
	t.Helper()
	addr, _ := startBridge(t, nil, withAuth)
	return addr
}

// withAuth requires a password (sekret) and has one user, alice (apw),
// allowed the keys app:*.
func withAuth(c *Config) {
	c.RequirePass = "sekret"
	c.Users = []User{NewUser("alice", "apw", "app:*")}
}

func TestAuthRequiredBeforeCommands(t *testing.T) {
	addr := startAuth(t)
	rc := dialRaw(t, addr)
	assert.Equal(t, string(errorLine(noAuth)), rc.do("GET", "k"))
	assert.Equal(t, string(errorLine(noAuth)), rc.do("FENCE.ACQUIRE", "app:1", "me", "10000"))
	assert.Equal(t, "+PONG\r\n", rc.do("PING"))
	assert.Equal(t, string(errorLine(noAuthHello)), rc.do("HELLO", "3"))
	start := time.Now()
	assert.Equal(t, string(errorLine(wrongPass)), rc.do("AUTH", "wrong"))
	assert.GreaterOrEqual(t, time.Since(start), authFailDelay, "a failure is slowed")
	assert.Equal(t, string(errorLine(wrongPass)), rc.do("AUTH", "nobody", "sekret"))
	assert.Equal(t, string(errorLine(wrongPass)), rc.do("AUTH", "alice", "sekret"))
	assert.Equal(t, string(errorLine(noAuth)), rc.do("GET", "k"), "still not authenticated")
	assert.Equal(t, "+OK\r\n", rc.do("AUTH", "sekret"))
	assert.Equal(t, "$-1\r\n", rc.do("GET", "k"))
	assert.Equal(t, "+RESET\r\n", rc.do("RESET"))
	assert.Equal(t, string(errorLine(noAuth)), rc.do("GET", "k"), "RESET signs out")

	hello := dialRaw(t, addr).do("HELLO", "3", "AUTH", "alice", "apw")
	assert.True(t, strings.HasPrefix(hello, "%7\r\n"), "%q", hello)
	assert.Equal(t, "+OK\r\n", dialRaw(t, addr).do("QUIT"))
}

func TestAuthPatternIsEnforcedPerUser(t *testing.T) {
	addr := startAuth(t)
	alice := dialRaw(t, addr)
	require.Equal(t, "+OK\r\n", alice.do("AUTH", "alice", "apw"))
	assert.True(t, strings.HasPrefix(alice.do("FENCE.ACQUIRE", "app:1", "me", "10000"), "*2\r\n"))
	assert.Equal(t, "+OK\r\n", alice.do("SET", "app:2", "v", "NX", "PX", "10000"))
	for _, cmd := range [][]string{
		{"FENCE.ACQUIRE", "other", "me", "10000"},
		{"FENCE.STATUS", "other"},
		{"SET", "other", "v", "NX", "PX", "10000"},
		{"GET", "other"},
		{"DEL", "app:1", "other"},
		{"EVAL", "return 1", "2", "app:1", "other"},
		{"EVALSHA", "0123456789012345678901234567890123456789", "1", "other"},
	} {
		assert.Equal(t, string(errorLine(noPermKey)), alice.do(cmd...), "%v", cmd)
	}
	assert.Equal(t, "-NOPERM User alice has no permissions to run the 'fence.snapshot' command\r\n", alice.do("FENCE.SNAPSHOT"))
	assert.Equal(t, "$1\r\nv\r\n", alice.do("GET", "app:2"), "the connection stays usable")

	admin := dialRaw(t, addr)
	require.Equal(t, "+OK\r\n", admin.do("AUTH", "default", "sekret"))
	assert.Equal(t, "$-1\r\n", admin.do("GET", "other"), "nothing was taken")
	assert.Equal(t, ":0\r\n", admin.do("EXISTS", "other"))
}

// A forwarding connection authenticates as ForwardUser before it marks
// itself; without it the leader refuses it.
func TestForwardingConnectionAuthenticates(t *testing.T) {
	addr := startAuth(t)
	cmd := resp.AppendCommand(nil, []byte("GET"), []byte("other"))

	f := newForwarder(resp.AppendCommand(nil, []byte("AUTH"), []byte("default"), []byte("sekret")), nil)
	defer f.close()
	reply, _, err := f.roundTrip(t.Context(), addr, 2, cmd)
	require.NoError(t, err)
	assert.Equal(t, "$-1\r\n", string(reply))

	none := newForwarder(nil, nil)
	defer none.close()
	_, sent, err := none.roundTrip(t.Context(), addr, 2, cmd)
	require.Error(t, err)
	assert.False(t, sent, "refused at the handshake: nothing was sent")
	assert.Contains(t, err.Error(), "NOAUTH")
}

func TestLoadUsers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users")
	require.NoError(t, os.WriteFile(path, []byte(`# user password pattern
alice apw app:*

node nodepw *   maxlocks=1000
bob sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 bob:*
`), 0o600))
	users, err := LoadUsers(path)
	require.NoError(t, err)
	require.Len(t, users, 3)
	assert.Equal(t, NewUser("alice", "apw", "app:*"), users[0])
	assert.Equal(t, NewUser("bob", "test", "bob:*").Digest, users[2].Digest, "the digest of \"test\"")
	assert.Empty(t, users[2].Password)
	assert.Equal(t, 1000, users[1].MaxLocks)
	assert.Zero(t, users[0].MaxLocks, "no limit unless given")

	cfg := DefaultConfig()
	cfg.Users = users
	assert.ErrorContains(t, cfg.Validate(), "config ForwardUser: needed with Users")
	cfg.ForwardUser = "bob"
	assert.ErrorContains(t, cfg.Validate(), `user "bob" needs pattern * and a plain-text password`)
	cfg.ForwardUser = "node"
	assert.NoError(t, cfg.Validate())

	for _, bad := range []string{"alice apw\n", "a p *\na q *\n", "a sha256:zz *\n",
		"a p * 10\n", "a p * maxlocks=0\n", "a p * maxlocks=x\n", "a p * maxlocks=1 more\n"} {
		require.NoError(t, os.WriteFile(path, []byte(bad), 0o600))
		_, err := LoadUsers(path)
		assert.Error(t, err, "%q", bad)
	}
}

// Joining a cluster that requires authentication sends AUTH first.
func TestJoinAuthenticates(t *testing.T) {
	addr := startAuth(t)
	join := []string{"FENCE.JOIN"}
	reply := func(auth []string) string {
		rc := dialRaw(t, addr)
		if auth != nil {
			if got := rc.do(auth...); !strings.HasPrefix(got, "+OK") {
				return got
			}
		}
		return rc.do(join...)
	}
	assert.Contains(t, reply(nil), "NOAUTH")
	assert.Contains(t, reply([]string{"AUTH", "default", "wrong"}), "WRONGPASS")
	assert.Contains(t, reply([]string{"AUTH", "default", "sekret"}), "wrong number of arguments", "authenticated: the join itself is answered")
}

// A user limited to a pattern lists only the names it may see: KEYS, from a
// client or a script, leaves the others out (Redis would refuse KEYS to such
// a user unless its ACL allowed every key; fencer filters instead).
func TestKeysListsOnlyTheUsersNames(t *testing.T) {
	addr := startAuth(t)
	admin := dialRaw(t, addr)
	require.Equal(t, "+OK\r\n", admin.do("AUTH", "default", "sekret"))
	for _, k := range []string{"app:1", "app:2", "other:1", "secret"} {
		require.Equal(t, "+OK\r\n", admin.do("SET", k, "v", "PX", "60000"))
	}
	assert.Equal(t, "*4\r\n", admin.do("KEYS", "*")[:4], "the admin sees every name")
	alice := dialRaw(t, addr)
	require.Equal(t, "+OK\r\n", alice.do("AUTH", "alice", "apw"))
	for _, cmd := range [][]string{
		{"KEYS", "*"},
		{"EVAL", "local k = redis.call('KEYS', '*'); table.sort(k); return k", "0"},
	} {
		got := alice.do(cmd...)
		assert.Contains(t, []string{"*2\r\n$5\r\napp:1\r\n$5\r\napp:2\r\n", "*2\r\n$5\r\napp:2\r\n$5\r\napp:1\r\n"}, got, "%v", cmd)
	}
}
