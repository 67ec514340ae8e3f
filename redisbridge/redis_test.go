package redisbridge

import (
	"bufio"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fencerlock/fencer/internal/resp"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rawConn speaks RESP by hand, to check the exact bytes of replies.
type rawConn struct {
	t  *testing.T
	c  net.Conn
	rd *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return &rawConn{t: t, c: c, rd: bufio.NewReader(c)}
}

// do sends args and returns the raw reply.
func (rc *rawConn) do(args ...string) string {
	rc.t.Helper()
	var bs [][]byte
	for _, a := range args {
		bs = append(bs, []byte(a))
	}
	_, err := rc.c.Write(resp.AppendCommand(nil, bs...))
	require.NoError(rc.t, err)
	return rc.read()
}

// read returns the next raw reply or message.
func (rc *rawConn) read() string {
	rc.t.Helper()
	require.NoError(rc.t, rc.c.SetReadDeadline(time.Now().Add(15*time.Second)))
	reply, err := resp.ReadRaw(rc.rd)
	require.NoError(rc.t, err)
	return string(reply)
}

func TestSetNXHasRedisSemantics(t *testing.T) {
	addr, _ := startBridge(t, nil, nil)
	c := newClient(t, addr)

	ok, err := c.SetNX(t.Context(), "k", "v1", 5*time.Second).Result()
	require.NoError(t, err)
	assert.True(t, ok)
	for _, v := range []string{"v1", "v2"} {
		ok, err = c.SetNX(t.Context(), "k", v, 5*time.Second).Result()
		require.NoError(t, err)
		assert.False(t, ok, "a second SET NX is refused, even with the same value %q", v)
	}
	got, err := c.Get(t.Context(), "k").Result()
	require.NoError(t, err)
	assert.Equal(t, "v1", got)
	pttl, err := c.PTTL(t.Context(), "k").Result()
	require.NoError(t, err)
	assert.InDelta(t, 5000, pttl.Milliseconds(), 1000)
	n, err := c.Exists(t.Context(), "k", "k", "free").Result()
	require.NoError(t, err)
	assert.Equal(t, int64(2), n)

	tok, err := do(t, c, "FENCE.TOKEN", "k", "v1")
	require.NoError(t, err)
	assert.Positive(t, tok)
	_, err = do(t, c, "FENCE.TOKEN", "k", "v2")
	assert.Equal(t, redis.Nil, err, "v2 does not hold k")
	cur, err := do(t, c, "FENCE.TOKEN", "k")
	require.NoError(t, err)
	assert.Equal(t, tok, cur)

	// redsync's release: 1 released, -1 already free.
	rel := redis.NewScript(redsyncDelete412)
	v, err := rel.Run(t.Context(), c, []string{"k"}, "v2").Result()
	require.NoError(t, err)
	assert.Equal(t, int64(0), v, "another value's release")
	v, err = rel.Run(t.Context(), c, []string{"k"}, "v1").Result()
	require.NoError(t, err)
	assert.Equal(t, int64(1), v)
	v, err = rel.Run(t.Context(), c, []string{"k"}, "v1").Result()
	require.NoError(t, err)
	assert.Equal(t, int64(-1), v)

	// As in Redis, the same value may take the key again after its release,
	// and gets a larger token.
	require.NoError(t, c.Do(t.Context(), "SET", "k", "v1", "EX", "8", "NX").Err())
	tok2, err := do(t, c, "FENCE.TOKEN", "k", "v1")
	require.NoError(t, err)
	assert.Greater(t, tok2.(int64), tok.(int64))
	pttl, err = c.PTTL(t.Context(), "k").Result()
	require.NoError(t, err)
	assert.InDelta(t, 8000, pttl.Milliseconds(), 1000)

	del, err := c.Del(t.Context(), "k", "free").Result()
	require.NoError(t, err)
	assert.Equal(t, int64(1), del)
	_, err = c.Get(t.Context(), "k").Result()
	assert.Equal(t, redis.Nil, err)
	pttl, err = c.PTTL(t.Context(), "k").Result()
	require.NoError(t, err)
	assert.Equal(t, time.Duration(-2), pttl)

	// SETNX and SET NX without expiry get the default lock TTL, never
	// an endless lease.
	ok, err = c.Do(t.Context(), "SETNX", "d", "x").Bool()
	require.NoError(t, err)
	assert.True(t, ok)
	ok, err = c.Do(t.Context(), "SETNX", "d", "x").Bool()
	require.NoError(t, err)
	assert.False(t, ok)
	require.NoError(t, c.Do(t.Context(), "SET", "e", "x", "NX").Err())
	for _, k := range []string{"d", "e"} {
		pttl, err = c.PTTL(t.Context(), k).Result()
		require.NoError(t, err)
		assert.InDelta(t, 30000, pttl.Milliseconds(), 2000, k)
	}

	// PEXPIRE renews whoever holds the key.
	ok, err = c.PExpire(t.Context(), "d", 60*time.Second).Result()
	require.NoError(t, err)
	assert.True(t, ok)
	ttl, err := c.TTL(t.Context(), "d").Result()
	require.NoError(t, err)
	assert.InDelta(t, 60, ttl.Seconds(), 2)
	ok, err = c.PExpire(t.Context(), "free", time.Second).Result()
	require.NoError(t, err)
	assert.False(t, ok)
	n, err = c.Do(t.Context(), "PEXPIRE", "d", "1000", "GT").Int64()
	require.NoError(t, err)
	assert.Equal(t, int64(0), n, "GT with a shorter time")
	n, err = c.Do(t.Context(), "PEXPIRE", "d", "1000", "LT").Int64()
	require.NoError(t, err)
	assert.Equal(t, int64(1), n)
	n, err = c.Do(t.Context(), "PEXPIRE", "d", "0").Int64()
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "a time of zero frees the key")
	assert.Equal(t, int64(0), c.Exists(t.Context(), "d").Val())
}

func TestRedisCommandErrorsUseRedisWording(t *testing.T) {
	addr, _ := startBridge(t, nil, nil)
	c := newClient(t, addr)
	for _, tc := range []struct {
		args []any
		want string
	}{
		{[]any{"SET", "k"}, "ERR wrong number of arguments for 'set' command"},
		{[]any{"SET", "k", "v", "NX", "PX", "0"}, "ERR invalid expire time in 'set' command"},
		{[]any{"SET", "k", "v", "NX", "PX", "-1"}, "ERR invalid expire time in 'set' command"},
		{[]any{"SET", "k", "v", "NX", "PX", "x"}, "ERR value is not an integer or out of range"},
		{[]any{"SET", "k", "v", "NX", "EX", "1", "PX", "5"}, "ERR syntax error"},
		{[]any{"SET", "k", "v", "NX", "XX"}, "ERR syntax error"},
		{[]any{"SET", "k", "v", "FOO"}, "ERR syntax error"},
		{[]any{"SET", "k", "v", "NX", "EX", "99999999999999999"}, "ERR invalid expire time in 'set' command"},
		{[]any{"SETNX", "k"}, "ERR wrong number of arguments for 'setnx' command"},
		{[]any{"GET"}, "ERR wrong number of arguments for 'get' command"},
		{[]any{"DEL"}, "ERR wrong number of arguments for 'del' command"},
		{[]any{"EXISTS"}, "ERR wrong number of arguments for 'exists' command"},
		{[]any{"PEXPIRE", "k", "x"}, "ERR value is not an integer or out of range"},
		{[]any{"PEXPIRE", "k", "10", "FOO"}, "ERR Unsupported option FOO"},
		{[]any{"PEXPIRE", "k", "10", "NX", "XX"}, "ERR NX and XX, GT or LT options at the same time are not compatible"},
		{[]any{"EVALSHA", "abc", "0"}, "NOSCRIPT No matching script. Please use EVAL."},
		{[]any{"EVALSHA", "abc", "x"}, "NOSCRIPT No matching script. Please use EVAL."},
		{[]any{"EVAL", redsyncTouch, "x"}, "ERR value is not an integer or out of range"},
		{[]any{"EVAL", redsyncTouch, "-1"}, "ERR Number of keys can't be negative"},
		{[]any{"EVAL", redsyncTouch, "2", "k"}, "ERR Number of keys can't be greater than number of args"},
		{[]any{"SCRIPT", "FOO"}, "ERR unknown subcommand 'FOO'. Try SCRIPT HELP."},
		{[]any{"SCRIPT", "LOAD"}, "ERR wrong number of arguments for 'script|load' command"},
		{[]any{"SCRIPT", "EXISTS"}, "ERR wrong number of arguments for 'script|exists' command"},
		{[]any{"SUBSCRIBE"}, "ERR wrong number of arguments for 'subscribe' command"},
		{[]any{"AUTH", "x"}, "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"},
		{[]any{"AUTH", "bob", "x"}, "WRONGPASS invalid username-password pair or user is disabled."},
		{[]any{"AUTH"}, "ERR wrong number of arguments for 'auth' command"},
		{[]any{"SELECT", "1"}, "ERR DB index is out of range"},
		{[]any{"SELECT", "x"}, "ERR value is not an integer or out of range"},
		{[]any{"CLIENT", "SETNAME"}, "ERR wrong number of arguments for 'client|setname' command"},
		{[]any{"CLIENT", "SETNAME", "a b"}, "ERR Client names cannot contain spaces, newlines or special characters."},
		{[]any{"CLIENT", "FOO"}, "ERR unknown subcommand 'FOO'. Try CLIENT HELP."},
		{[]any{"CLIENT", "SETINFO", "FOO", "x"}, "ERR Unrecognized option 'FOO'"},
		{[]any{"CLIENT", "SETINFO", "lib-name", "a b"}, "ERR lib-name cannot contain spaces, newlines or special characters."},
		{[]any{"COMMAND", "FOO"}, "ERR unknown subcommand 'FOO'. Try COMMAND HELP."},
		{[]any{"ECHO"}, "ERR wrong number of arguments for 'echo' command"},
		{[]any{"HELLO", "4"}, "NOPROTO unsupported protocol version"},
		{[]any{"HELLO", "x"}, "ERR Protocol version is not an integer or out of range"},
		{[]any{"HELLO", "3", "AUTH", "bob", "x"}, "WRONGPASS invalid username-password pair or user is disabled."},
		{[]any{"HELLO", "3", "SETNAME", "a", "b"}, "ERR Syntax error in HELLO option 'b'"},
		{[]any{"HELLO", "3", "FOO"}, "ERR Syntax error in HELLO option 'FOO'"},
	} {
		_, err := do(t, c, tc.args...)
		require.Error(t, err, "%v", tc.args)
		assert.Equal(t, tc.want, err.Error(), "%v", tc.args)
	}
	got, err := do(t, c, "PING")
	require.NoError(t, err)
	assert.Equal(t, "PONG", got, "the connection stays usable and in RESP2")
}

func TestRedlockMultiEndpointIsIdempotentPerValue(t *testing.T) {
	addr, _ := startBridge(t, nil, func(c *Config) { c.RedlockMultiEndpoint = true })
	c := newClient(t, addr)
	for range 2 {
		ok, err := c.SetNX(t.Context(), "k", "v1", 5*time.Second).Result()
		require.NoError(t, err)
		assert.True(t, ok, "the same value's repeated acquire (through another node) succeeds")
	}
	ok, err := c.SetNX(t.Context(), "k", "v2", 5*time.Second).Result()
	require.NoError(t, err)
	assert.False(t, ok, "another value is refused")

	rel := redis.NewScript(redsyncDelete412)
	for range 2 {
		v, err := rel.Run(t.Context(), c, []string{"k"}, "v1").Result()
		require.NoError(t, err)
		assert.Equal(t, int64(1), v, "a repeated release succeeds")
	}
	ok, err = c.SetNX(t.Context(), "k", "v1", 5*time.Second).Result()
	require.NoError(t, err)
	assert.False(t, ok, "a delayed acquire after the value's release cannot resurrect the lock")
	ok, err = c.SetNX(t.Context(), "k", "v3", 5*time.Second).Result()
	require.NoError(t, err)
	assert.True(t, ok)

	// node-redlock's multi-key acquire, repeated, and its release.
	acq := redis.NewScript(redlockAcquire5)
	for range 2 {
		n, err := acq.Run(t.Context(), c, []string{"a", "b"}, "w", 5000).Int64()
		require.NoError(t, err)
		assert.Equal(t, int64(2), n)
	}
	n, err := redis.NewScript(redlockRelease5).Run(t.Context(), c, []string{"a", "b"}, "w").Int64()
	require.NoError(t, err)
	assert.Equal(t, int64(2), n)
}

func TestLockScriptsByLibrary(t *testing.T) {
	addr, _ := startBridge(t, nil, nil)
	c := newClient(t, addr)
	run := func(text string, keys []string, args ...any) any {
		t.Helper()
		v, err := redis.NewScript(text).Run(t.Context(), c, keys, args...).Result()
		if err == redis.Nil {
			return nil
		}
		require.NoError(t, err)
		return v
	}
	for _, s := range knownScripts {
		sha, err := c.ScriptLoad(t.Context(), s.text).Result()
		require.NoError(t, err, s.library)
		assert.Equal(t, scriptSHA([]byte(s.text)), sha)
	}
	ex, err := c.ScriptExists(t.Context(), scriptSHA([]byte(redsyncTouch)), "0000").Result()
	require.NoError(t, err)
	assert.Equal(t, []bool{true, false}, ex)

	// redsync: touch and touch-with-SETNX.
	require.True(t, c.SetNX(t.Context(), "rs", "v", 2*time.Second).Val())
	assert.Equal(t, int64(1), run(redsyncTouch, []string{"rs"}, "v", 9000))
	assert.InDelta(t, 9000, c.PTTL(t.Context(), "rs").Val().Milliseconds(), 1000)
	assert.Equal(t, int64(0), run(redsyncTouch, []string{"rs"}, "other", 9000))
	assert.Equal(t, int64(0), run(redsyncTouchSetNX, []string{"rs"}, "other", 9000))
	assert.Equal(t, int64(1), run(redsyncTouchSetNX, []string{"rs-free"}, "v", 9000), "takes a free key")
	assert.Equal(t, "v", c.Get(t.Context(), "rs-free").Val())
	assert.Equal(t, int64(1), run(redsyncDelete40, []string{"rs"}, "v"))
	assert.Equal(t, int64(0), run(redsyncDelete40, []string{"rs"}, "v"))

	// node-redlock: all or nothing.
	require.True(t, c.SetNX(t.Context(), "b", "x", 5*time.Second).Val())
	for _, s := range []string{redlockAcquire40, redlockAcquire41, redlockAcquire5} {
		assert.Equal(t, int64(0), run(s, []string{"a", "b", "c"}, "v", 5000))
		assert.Equal(t, int64(0), c.Exists(t.Context(), "a", "c").Val(), "nothing taken when one key is held")
	}
	assert.Equal(t, int64(3), run(redlockAcquire41, []string{"a", "c", "d"}, "v", 5000))
	for _, s := range []string{redlockExtend40, redlockExtend41, redlockExtend42, redlockExtend5} {
		assert.Equal(t, int64(3), run(s, []string{"a", "c", "d"}, "v", 9000))
		assert.Equal(t, int64(0), run(s, []string{"a", "b"}, "v", 9000), "b is not v's")
	}
	assert.InDelta(t, 9000, c.PTTL(t.Context(), "d").Val().Milliseconds(), 1000)
	assert.Equal(t, int64(2), run(redlockRelease42, []string{"a", "b", "c"}, "v"))
	assert.Equal(t, int64(1), run(redlockRelease40, []string{"d"}, "v"))
	assert.Equal(t, int64(0), run(redlockRelease5, []string{"d"}, "v"))

	// redis-py: extend adds to the remaining time, or replaces it.
	require.True(t, c.SetNX(t.Context(), "py", "tok", 4*time.Second).Val())
	assert.Equal(t, int64(1), run(redisPyExtend35, []string{"py"}, "tok", 3000, "0"))
	assert.InDelta(t, 7000, c.PTTL(t.Context(), "py").Val().Milliseconds(), 1000)
	assert.Equal(t, int64(1), run(redisPyExtend35, []string{"py"}, "tok", 2000, "1"))
	assert.InDelta(t, 2000, c.PTTL(t.Context(), "py").Val().Milliseconds(), 1000)
	assert.Equal(t, int64(1), run(redisPyExtend30, []string{"py"}, "tok", 3000))
	assert.InDelta(t, 5000, c.PTTL(t.Context(), "py").Val().Milliseconds(), 1000)
	assert.Equal(t, int64(1), run(redisPyReacquire, []string{"py"}, "tok", 10000))
	assert.InDelta(t, 10000, c.PTTL(t.Context(), "py").Val().Milliseconds(), 1000)
	assert.Equal(t, int64(0), run(redisPyExtend35, []string{"py"}, "nope", 3000, "0"))
	assert.Equal(t, int64(0), run(redisPyRelease, []string{"py"}, "nope"))
	assert.Equal(t, int64(1), run(redisPyRelease, []string{"py"}, "tok"))
	assert.Equal(t, int64(0), run(redisPyReacquire, []string{"py"}, "tok", 10000))

	// Run without its key, the script fails as it does on Redis: GET of
	// KEYS[1], which is nil.
	_, err = do(t, c, "EVALSHA", scriptSHA([]byte(redsyncTouch)), "0", "v", "1000")
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "ERR Lua redis lib command arguments must be strings or integers"), err.Error())
}

// A script is one entry, all or nothing, however many keys it takes:
// node-redlock's acquire of 1,000 keys grants them all in one entry (one
// token for all), and its release frees them all at once.
func TestScriptOfManyKeysIsOneEntry(t *testing.T) {
	addr, _ := startBridge(t, nil, nil)
	c := newClient(t, addr)
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = "m" + strconv.Itoa(i)
	}
	require.Eventually(t, func() bool { // the node may not lead yet
		return c.SetNX(t.Context(), "ready", "w", time.Minute).Err() == nil
	}, 10*time.Second, 20*time.Millisecond)
	require.NoError(t, c.SetNX(t.Context(), keys[999], "other", time.Minute).Err())
	n, err := redis.NewScript(redlockAcquire5).Run(t.Context(), c, keys, "w", 60000).Int64()
	require.NoError(t, err)
	assert.Zero(t, n, "one key is held: none is taken")
	require.NoError(t, c.Del(t.Context(), keys[999]).Err())
	for _, k := range keys {
		require.Equal(t, redis.Nil, c.Get(t.Context(), k).Err(), "%s was taken by the refused acquire", k)
	}

	n, err = redis.NewScript(redlockAcquire5).Run(t.Context(), c, keys, "w", 60000).Int64()
	require.NoError(t, err)
	assert.EqualValues(t, len(keys), n)
	tokens := map[int64]bool{}
	for _, k := range keys {
		tok, err := c.Do(t.Context(), "FENCE.TOKEN", k, "w").Int64()
		require.NoError(t, err)
		tokens[tok] = true
	}
	assert.Len(t, tokens, 1, "every key granted by the one entry has its token")

	n, err = redis.NewScript(redlockRelease5).Run(t.Context(), c, keys, "w").Int64()
	require.NoError(t, err)
	assert.EqualValues(t, len(keys), n)
	for _, k := range keys {
		require.Equal(t, redis.Nil, c.Get(t.Context(), k).Err())
	}
}
