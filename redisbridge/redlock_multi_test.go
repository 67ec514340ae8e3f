package redisbridge

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Scripts of libraries that reuse a value, as their sources send them
// (integration/testdata/redisdiff/scripts).
const (
	aioredlockSet = `local identifier = redis.call('get', KEYS[1])
if not identifier or identifier == ARGV[1] then
return redis.call("set", KEYS[1], ARGV[1], 'PX', ARGV[2])
else
return redis.error_reply('ERROR')
end`
	aioredlockTTL = `local identifier = redis.call('get', KEYS[1])
if not identifier then
return redis.error_reply('ERROR')
elseif identifier == ARGV[1] then
return redis.call("TTL", KEYS[1])
else
return redis.error_reply('ERROR')
end`
	springObtain = `local lockClientId = redis.call('GET', KEYS[1])
if lockClientId == ARGV[1] then
	redis.call('PEXPIRE', KEYS[1], ARGV[2])
	return true
elseif not lockClientId then
	redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
	return true
end
return false`
	springRenew = `if (redis.call('GET', KEYS[1]) == ARGV[1]) then
	redis.call('PEXPIRE', KEYS[1], ARGV[2])
	return true
end
return false`
)

// released asserts that err is the refusal of a value whose release of the
// key is remembered.
func released(t *testing.T, err error, what string) {
	t.Helper()
	if assert.Error(t, err, "%s: a refused write is an error, never a yes", what) {
		assert.True(t, strings.HasPrefix(err.Error(), "RELEASED "), "%s: %v", what, err)
	}
}

// With --redlock-multi-endpoint a value whose release of a key is
// remembered is refused every write of the key: with Redis's "not done"
// reply where the command has one, otherwise with RELEASED; inside a script
// too, with nothing the script did taking effect. (issue 31, item 1)
func TestRedlockMultiRefusedWriteIsNeverAYes(t *testing.T) {
	addr, _ := startBridge(t, nil, func(c *Config) { c.RedlockMultiEndpoint = true })
	c := newClient(t, addr)
	rel := redis.NewScript(redsyncDelete412)
	take := func(key, value string) {
		t.Helper()
		ok, err := c.SetNX(t.Context(), key, value, 10*time.Second).Result()
		require.NoError(t, err)
		require.True(t, ok)
		n, err := rel.Run(t.Context(), c, []string{key}, value).Int64()
		require.NoError(t, err)
		require.Equal(t, int64(1), n)
	}
	free := func(key, what string) {
		t.Helper()
		_, err := c.Get(t.Context(), key).Result()
		assert.Equal(t, redis.Nil, err, "%s: the key stays free", what)
	}
	take("k", "v")
	take("n", "1")

	// Redis's "not done" replies.
	_, err := do(t, c, "SET", "k", "v", "NX", "PX", 10000)
	assert.Equal(t, redis.Nil, err, "SET NX")
	_, err = do(t, c, "SET", "k", "v", "XX")
	assert.Equal(t, redis.Nil, err, "SET XX")
	got, err := do(t, c, "SETNX", "k", "v")
	assert.NoError(t, err)
	assert.Equal(t, int64(0), got, "SETNX")
	got, err = do(t, c, "MSETNX", "k", "v", "other1", "x")
	assert.NoError(t, err)
	assert.Equal(t, int64(0), got, "MSETNX")

	// Every other string write: an error.
	for _, args := range [][]any{
		{"SET", "k", "v", "PX", 10000},
		{"SET", "k", "v"},
		{"SET", "k", "v", "GET"},
		{"SETEX", "k", 10, "v"},
		{"PSETEX", "k", 10000, "v"},
		{"GETSET", "k", "v"},
		{"MSET", "other2", "x", "k", "v"},
		{"APPEND", "k", "v"},
		{"INCR", "n"},
		{"INCRBY", "n", 1},
		{"DECRBY", "n", -1},
		{"INCRBYFLOAT", "n", "1"},
	} {
		_, err := do(t, c, args...)
		released(t, err, args[0].(string))
	}
	free("k", "after the writes")
	free("n", "after the counters")
	free("other1", "MSETNX is all or nothing")
	free("other2", "MSET is all or nothing")

	// Scripts: aioredlock's acquire counts any reply but an error as a
	// yes; Spring's RedisLockRegistry re-takes with its registry's id.
	for _, s := range []struct{ name, text string }{{"aioredlock", aioredlockSet}, {"spring obtain", springObtain}} {
		_, err := redis.NewScript(s.text).Run(t.Context(), c, []string{"k"}, "v", 10000).Result()
		released(t, err, s.name)
		free("k", s.name)
	}
	// A ghost read may only complete a release.
	for _, s := range []struct{ name, text string }{{"spring renew", springRenew}, {"aioredlock ttl", aioredlockTTL}} {
		_, err := redis.NewScript(s.text).Run(t.Context(), c, []string{"k"}, "v", 10000).Result()
		released(t, err, s.name)
		free("k", s.name)
	}
	// redis.pcall cannot catch it, and nothing the script did stays.
	_, err = redis.NewScript(`redis.call('set', 'side', 'x')
local r = redis.pcall('set', KEYS[1], ARGV[1], 'PX', 1000) return 1`).Run(t.Context(), c, []string{"k"}, "v").Result()
	released(t, err, "pcall")
	free("side", "a refused script")
	free("k", "a refused script")

	// The repeated release still succeeds, and other values are untouched.
	n, err := rel.Run(t.Context(), c, []string{"k"}, "v").Int64()
	require.NoError(t, err)
	assert.Equal(t, int64(1), n)
	ok, err := c.SetNX(t.Context(), "k", "w", 10*time.Second).Result()
	require.NoError(t, err)
	assert.True(t, ok)
	require.NoError(t, c.Set(t.Context(), "k", "w2", 0).Err(), "a value that released nothing writes as in Redis")
}

// A Redlock client's release through every address succeeds however other
// owners take and release the key between its addresses, and changes
// nothing of the holder's: the late address's request is held back until
// the other owners acted. (issue 31, item 2)
func TestRedlockMultiLateReleaseUnderContention(t *testing.T) {
	addr, _ := startBridge(t, nil, func(c *Config) { c.RedlockMultiEndpoint = true })
	c := newClient(t, addr)
	rel := redis.NewScript(redsyncDelete412)
	touch := redis.NewScript(redsyncTouch)
	acquire := func(v string) {
		t.Helper()
		for range 2 { // two of three addresses
			ok, err := c.SetNX(t.Context(), "k", v, 20*time.Second).Result()
			require.NoError(t, err)
			require.True(t, ok, "%s's acquire", v)
		}
	}
	release := func(v, what string) {
		t.Helper()
		n, err := rel.Run(t.Context(), c, []string{"k"}, v).Int64()
		require.NoError(t, err, what)
		assert.Equal(t, int64(1), n, what)
	}
	holder := func() (string, int64, int64) {
		t.Helper()
		v, err := c.Get(t.Context(), "k").Result()
		if err == redis.Nil {
			return "", 0, -2
		}
		require.NoError(t, err)
		tok, err := do(t, c, "FENCE.TOKEN", "k", v)
		require.NoError(t, err)
		return v, tok.(int64), c.PTTL(t.Context(), "k").Val().Milliseconds()
	}

	acquire("a")
	release("a", "a's release at the first address")
	acquire("b")
	bv, btok, bttl := holder()
	require.Equal(t, "b", bv)
	// a's release reaches the second address now that b holds the key.
	release("a", "a's late release while b holds the key")
	// a's late extend changes nothing of b's.
	_, _ = touch.Run(t.Context(), c, []string{"k"}, "a", 90000).Result()
	v, tok, ttl := holder()
	assert.Equal(t, "b", v, "b still holds the key")
	assert.Equal(t, btok, tok, "b's token is unchanged")
	assert.InDelta(t, bttl, ttl, 2000, "b's TTL is unchanged")

	release("b", "b's release")
	acquire("c")
	release("c", "c's release")
	release("a", "a's release at the third address, after b and c released")
	release("b", "b's late release")
	release("c", "c's late release")
	v, _, _ = holder()
	assert.Equal(t, "", v, "the key is free")
}
