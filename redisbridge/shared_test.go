package redisbridge

import (
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSharedCommands(t *testing.T) {
	addr, _ := startBridge(t, nil, nil)
	c0 := newClient(t, addr)
	// A null reply is nil here, not redis.Nil.
	do := func(t *testing.T, _ *redis.Client, args ...any) (any, error) {
		v, err := do(t, c0, args...)
		if errors.Is(err, redis.Nil) {
			return nil, nil
		}
		return v, err
	}
	c := c0
	r1, err := do(t, c, "FENCE.RLOCK", "rw", "r1", 10000)
	require.NoError(t, err)
	r2, err := do(t, c, "FENCE.RLOCK", "rw", "r2", 10000)
	require.NoError(t, err)
	assert.Greater(t, r2.([]any)[0].(int64), r1.([]any)[0].(int64))
	w, err := do(t, c, "FENCE.WLOCK", "rw", "w", 10000)
	require.NoError(t, err)
	assert.Nil(t, w)
	_, err = do(t, c, "FENCE.WLOCK", "rw", "r1", 10000)
	assert.ErrorContains(t, err, "ERR invalid argument: owner: holds a read lock")
	_, err = do(t, c, "FENCE.ACQUIRE", "rw", "x", 10000)
	assert.ErrorContains(t, err, "WRONGTYPE")
	_, err = do(t, c, "FENCE.SEMACQUIRE", "rw", "x", 10000, 2)
	assert.ErrorContains(t, err, "WRONGTYPE")
	hs, err := do(t, c, "FENCE.HOLDERS", "rw")
	require.NoError(t, err)
	require.Len(t, hs, 2)
	h := hs.([]any)[0].([]any)
	assert.Equal(t, "r1", h[0])
	assert.Equal(t, "read", h[4])

	s0, err := do(t, c, "FENCE.SEMACQUIRE", "sem", "a", 10000, 2)
	require.NoError(t, err)
	assert.Equal(t, int64(0), s0.([]any)[0])
	s1, err := do(t, c, "FENCE.SEMACQUIRE", "sem", "b", 10000, 2)
	require.NoError(t, err)
	assert.Equal(t, int64(1), s1.([]any)[0])
	full, err := do(t, c, "FENCE.SEMACQUIRE", "sem", "c", 10000, 2)
	require.NoError(t, err)
	assert.Nil(t, full)
	_, err = do(t, c, "FENCE.SEMACQUIRE", "sem", "c", 10000, 3)
	assert.ErrorContains(t, err, "ERR invalid argument: permits: the semaphore sem has 2 permits, not 3")
	_, err = do(t, c, "FENCE.SEMACQUIRE", "sem", "c", 10000, "x")
	assert.ErrorContains(t, err, "ERR invalid argument: permits: want the semaphore's number of permits (a whole number), got 'x'")
	rel, err := do(t, c, "FENCE.RELEASE", "sem", "a")
	require.NoError(t, err)
	assert.Equal(t, int64(1), rel)
	s2, err := do(t, c, "FENCE.SEMACQUIRE", "sem", "c", 10000, 2, "WAIT", 1000)
	require.NoError(t, err)
	assert.Equal(t, int64(0), s2.([]any)[0], "the lowest free slot")

	m, err := do(t, c, "FENCE.MACQUIRE", "me", 10000, 3, "m1", "m2", "m3", "WAIT", 1000)
	require.NoError(t, err)
	tok := m.([]any)[0].(int64)
	for _, k := range []string{"m1", "m2", "m3"} {
		got, err := do(t, c, "FENCE.TOKEN", k)
		require.NoError(t, err)
		assert.Equal(t, tok, got)
	}
	none, err := do(t, c, "FENCE.MACQUIRE", "you", 10000, 2, "m3", "m4")
	require.NoError(t, err)
	assert.Nil(t, none)
	st, err := do(t, c, "FENCE.STATUS", "m4")
	require.NoError(t, err)
	assert.Nil(t, st, "all or nothing")
	n, err := do(t, c, "FENCE.MEXTEND", "me", 10000, 3, "m1", "m2", "m3")
	require.NoError(t, err)
	assert.Equal(t, int64(3), n)
	n, err = do(t, c, "FENCE.MRELEASE", "me", 3, "m1", "m2", "m3")
	require.NoError(t, err)
	assert.Equal(t, int64(3), n)
	_, err = do(t, c, "FENCE.MACQUIRE", "me", 10000, 0, "x")
	assert.ErrorContains(t, err, "numkeys")
	_, err = do(t, c, "FENCE.MACQUIRE", "me", 10000, 3, "a", "b")
	assert.ErrorContains(t, err, "wrong number of arguments")
	_, err = do(t, c, "FENCE.MRELEASE", "me", 1, "a", "BOGUS")
	assert.ErrorContains(t, err, "option: 'BOGUS' is not one here: want SESSION id")
	_, err = do(t, c, "FENCE.MACQUIRE", "me", 0, 2, "s1", "s2", "SESSION", 7)
	assert.EqualError(t, err, "ERR invalid argument: session: several keys at once cannot be taken under a session")
}

// Redis commands on a shared key answer WRONGTYPE or act on the whole key
// (DEL revokes every holder), and never change it behind the table's back.
func TestRedisCommandsOnSharedKeys(t *testing.T) {
	addr, _ := startBridge(t, nil, nil)
	c := newClient(t, addr)
	_, err := do(t, c, "FENCE.RLOCK", "k", "r1", 10000)
	require.NoError(t, err)
	_, err = do(t, c, "FENCE.RLOCK", "k", "r2", 10000)
	require.NoError(t, err)
	_, err = do(t, c, "GET", "k")
	assert.ErrorContains(t, err, "WRONGTYPE")
	_, err = do(t, c, "HSET", "k", "f", "v")
	assert.ErrorContains(t, err, "WRONGTYPE")
	typ, err := do(t, c, "TYPE", "k")
	require.NoError(t, err)
	assert.Equal(t, "fencer-shared", typ)
	hs, err := do(t, c, "FENCE.HOLDERS", "k")
	require.NoError(t, err)
	assert.Len(t, hs, 2, "still both readers")
	n, err := do(t, c, "DEL", "k")
	require.NoError(t, err)
	assert.Equal(t, int64(1), n)
	hs, err = do(t, c, "FENCE.HOLDERS", "k")
	require.NoError(t, err)
	assert.Empty(t, hs)
}
