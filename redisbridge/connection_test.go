package redisbridge

import (
	"strings"
	"testing"

	"github.com/fencerlock/fencer/internal/version"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHelloSwitchesToRESP3AndBack(t *testing.T) {
	addr, _ := startBridge(t, nil, nil)
	rc := dialRaw(t, addr)

	assert.Equal(t, "$-1\r\n", rc.do("GET", "free"), "RESP2 by default")
	hello := rc.do("HELLO", "3", "AUTH", "default", "any", "SETNAME", "me")
	assert.True(t, strings.HasPrefix(hello, "%7\r\n$6\r\nserver\r\n$6\r\nfencer\r\n$7\r\nversion\r\n$5\r\n7.2.0\r\n$5\r\nproto\r\n:3\r\n$2\r\nid\r\n:"), "%q", hello)
	assert.True(t, strings.HasSuffix(hello, "$4\r\nmode\r\n$10\r\nstandalone\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n"), "%q", hello)
	assert.Equal(t, "$2\r\nme\r\n", rc.do("CLIENT", "GETNAME"))

	// Replies whose types differ in RESP3.
	assert.Equal(t, "_\r\n", rc.do("GET", "free"))
	assert.Equal(t, "_\r\n", rc.do("FENCE.STATUS", "free"))
	assert.Equal(t, "+OK\r\n", rc.do("SET", "k", "v", "NX", "PX", "5000"))
	assert.Equal(t, "_\r\n", rc.do("SET", "k", "v", "NX", "PX", "5000"))
	assert.Equal(t, "$1\r\nv\r\n", rc.do("GET", "k"))
	assert.Equal(t, "_\r\n", rc.do("FENCE.TOKEN", "k", "other"))
	info := rc.do("INFO")
	assert.True(t, strings.HasPrefix(info, "="), "INFO is a verbatim string: %q", info[:10])
	for _, want := range []string{"txt:# Server\r\n", "redis_version:7.2.0\r\n", "fencer_version:" + version.Version + "\r\n",
		"fencer_commit:" + version.Get().Revision + "\r\n", "loading:0\r\n", "role:master\r\n"} {
		assert.Contains(t, info, want)
	}
	docs := rc.do("COMMAND", "DOCS", "get")
	assert.True(t, strings.HasPrefix(docs, "%1\r\n$3\r\nget\r\n%4\r\n$7\r\nsummary\r\n"), "%q", docs)

	assert.True(t, strings.HasPrefix(rc.do("HELLO", "2"), "*14\r\n"))
	assert.Equal(t, "$-1\r\n", rc.do("GET", "free"))
	assert.Equal(t, "+OK\r\n", rc.do("SELECT", "0"))
	assert.Equal(t, "+OK\r\n", rc.do("AUTH", "default", "x"))
	assert.Equal(t, "+OK\r\n", rc.do("CLIENT", "SETINFO", "LIB-NAME", "redis-py"))
	assert.Equal(t, "+OK\r\n", rc.do("CLIENT", "SETINFO", "lib-ver", "4.3.4"))
	assert.Contains(t, rc.do("CLIENT", "INFO"), "name=me db=0 sub=0 lib-name=redis-py lib-ver=4.3.4 resp=2")
	assert.Equal(t, "$2\r\nhi\r\n", rc.do("ECHO", "hi"))
	assert.Equal(t, "+RESET\r\n", rc.do("RESET"))
	assert.Equal(t, "$-1\r\n", rc.do("CLIENT", "GETNAME"))
	assert.Equal(t, "+OK\r\n", rc.do("QUIT"))
}

// The connection handshakes of real clients: go-redis with RESP3 (HELLO 3,
// CLIENT SETINFO) and RESP2, and the COMMAND replies clients parse.
func TestClientsConnectWithTheirHandshakes(t *testing.T) {
	addr, _ := startBridge(t, nil, nil)
	for _, proto := range []int{2, 3} {
		c := redis.NewClient(&redis.Options{Addr: addr, Protocol: proto, ClientName: "fencer-test", DB: 0})
		t.Cleanup(func() { _ = c.Close() })
		ok, err := c.SetNX(t.Context(), "p", "v", 0).Result()
		require.NoError(t, err, "proto %d", proto)
		assert.Equal(t, proto == 2, ok, "the first client takes the lock")
		_, err = c.Get(t.Context(), "free").Result()
		assert.Equal(t, redis.Nil, err, "proto %d", proto)
		name, err := c.ClientGetName(t.Context()).Result()
		require.NoError(t, err)
		assert.Equal(t, "fencer-test", name)
		info, err := c.Info(t.Context(), "replication").Result()
		require.NoError(t, err)
		assert.Contains(t, info, "role:master")

		cmds, err := c.Command(t.Context()).Result()
		require.NoError(t, err, "proto %d", proto)
		require.Contains(t, cmds, "set")
		assert.Equal(t, int8(1), cmds["set"].FirstKeyPos)
		assert.Equal(t, int8(-3), cmds["set"].Arity)
		assert.Contains(t, cmds, "fence.acquire")
		n, err := c.Do(t.Context(), "COMMAND", "COUNT").Int()
		require.NoError(t, err)
		assert.Equal(t, len(cmds), n)
	}
}
