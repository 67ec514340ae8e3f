package rediscompat

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencerlock/fencer/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests run the engine over a real one-node fencer (server.Node on
// loopback, with its log store and fsync).

func openNode(t *testing.T, mod ...func(*server.Config)) *server.Node {
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.RaftAddr = "127.0.0.1:0"
	cfg.RaftLogLevel = "error"
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, m := range mod {
		m(&cfg)
	}
	n, err := server.Open(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Close() })
	require.Eventually(t, func() bool { return n.Ready() == nil }, 10*time.Second, 10*time.Millisecond)
	return n
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// do runs one command on e and fails the test on a node error.
func do(t *testing.T, e *Engine, s *Session, args ...string) Reply {
	t.Helper()
	b := make([][]byte, len(args))
	for i, a := range args {
		b[i] = []byte(a)
	}
	r, err := e.Do(ctxT(t), s, b)
	require.NoError(t, err, "%v", args)
	return r
}

func newEngine(t *testing.T, cfg Config, mod ...func(*server.Config)) (*Engine, *server.Node) {
	t.Helper()
	n := openNode(t, mod...)
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return New(n, cfg), n
}

// A script that meets a conflict is run again from the start; what it did
// on the first run (an INCR, a PUBLISH) has no effect, and its PUBLISH is
// sent once, after its entry commits.
func TestScriptRunAgainAfterAConflict(t *testing.T) {
	var mu sync.Mutex
	var got []string
	e, n := newEngine(t, Config{Publish: func(_ bool, ch string, msg []byte) int {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, ch+"="+string(msg))
		return 1
	}})
	s := &Session{}
	// The script reads KEYS[2], works a while, then writes. Meanwhile a
	// native acquire (which takes no latch) takes KEYS[2]: the first run's
	// entry conflicts.
	script := `local v = redis.call('get', KEYS[2]) for i = 1, 3000000 do end
redis.call('incr', KEYS[1]) redis.call('publish', 'ch', tostring(v)) return v`
	go func() {
		time.Sleep(30 * time.Millisecond)
		_, _, _ = n.Acquire(context.Background(), "watched", "intruder", 10*time.Second, 0)
	}()
	r := do(t, e, s, "EVAL", script, "2", "counter", "watched")
	assert.Equal(t, Bulk("intruder"), r, "the reply is the second run's")
	assert.Equal(t, Bulk("1"), do(t, e, s, "GET", "counter"), "the first run's INCR took no effect")
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"ch=intruder"}, got, "published once, after the commit")
}

// A script stopped by a fencer limit has no effect; a Lua error keeps what
// the script wrote before it, as in Redis.
func TestLimitsStopScriptsWithNothingDone(t *testing.T) {
	e, _ := newEngine(t, Config{ScriptTimeLimit: 200 * time.Millisecond}, func(c *server.Config) {
		c.MaxValueSize = 1024
		c.MaxWriteSize = 4096
	})
	s := &Session{}
	run := func(script string, keys ...string) (Reply, error) {
		args := [][]byte{[]byte("EVAL"), []byte(script), []byte(string(rune('0' + len(keys))))}
		for _, k := range keys {
			args = append(args, []byte(k))
		}
		return e.Do(ctxT(t), s, args)
	}
	start := time.Now()
	_, err := run("redis.call('set', KEYS[1], 'x') while true do end", "looped")
	require.ErrorIs(t, err, server.ErrLimit)
	assert.Contains(t, err.Error(), "time limit")
	assert.Less(t, time.Since(start), 2*time.Second)
	assert.Equal(t, Nil{}, do(t, e, s, "GET", "looped"), "nothing of a stopped script took effect")

	_, err = run("redis.call('set', KEYS[1], 'a') return redis.call('set', KEYS[2], string.rep('x', 2000))", "small", "big")
	require.ErrorIs(t, err, server.ErrLimit)
	assert.Contains(t, err.Error(), "value of 2000 bytes")
	assert.Equal(t, Nil{}, do(t, e, s, "GET", "small"))

	_, err = run("for i = 1, 8 do redis.call('set', KEYS[1]..i, string.rep('x', 1000)) end return 1", "many")
	require.ErrorIs(t, err, server.ErrLimit)
	assert.Contains(t, err.Error(), "writes")

	assert.Equal(t, replyOK, do(t, e, s, "SET", "notint", "abc"))
	r, err := run("redis.call('set', KEYS[1], 'kept') return redis.call('incr', KEYS[2])", "kept", "notint")
	require.NoError(t, err)
	require.IsType(t, Error(""), r)
	assert.True(t, strings.HasPrefix(string(r.(Error)), "ERR value is not an integer or out of range"), "%v", r)
	assert.Equal(t, Bulk("kept"), do(t, e, s, "GET", "kept"), "a Lua error keeps the writes before it, as in Redis")
}

// Every redis.call checks the user's key patterns, not only the KEYS the
// script declares.
func TestScriptsCheckEveryKey(t *testing.T) {
	e, _ := newEngine(t, Config{})
	s := &Session{Allowed: func(k string) bool { return strings.HasPrefix(k, "app:") }}
	r := do(t, e, s, "EVAL", "return redis.call('set', KEYS[1], 'v')", "1", "app:1")
	assert.Equal(t, Status("OK"), r)
	r = do(t, e, s, "EVAL", "return redis.call('get', 'other')", "0")
	require.IsType(t, Error(""), r)
	assert.Equal(t, "NOPERM", Error(r.(Error)).Code())
	r = do(t, e, s, "EVAL", "return redis.pcall('set', 'other', 'v')", "1", "app:1")
	assert.Equal(t, "NOPERM", r.(Error).Code())
	r = do(t, e, s, "EVAL", "return 1", "1", "other")
	assert.Equal(t, errNoPermKey, r, "declared keys are checked first, as Redis does")
	r = do(t, e, s, "GET", "other")
	assert.Equal(t, errNoPermKey, r)
	assert.Equal(t, Nil{}, do(t, e, &Session{}, "GET", "other"), "nothing was written")
}

// Every key a command creates counts toward MaxLocks.
func TestKeysCountTowardMaxLocks(t *testing.T) {
	e, _ := newEngine(t, Config{}, func(c *server.Config) { c.MaxLocks = 3 })
	s := &Session{}
	assert.Equal(t, Int(1), do(t, e, s, "HSET", "h", "f", "v"))
	assert.Equal(t, Int(1), do(t, e, s, "RPUSH", "l", "x"))
	assert.Equal(t, replyOK, do(t, e, s, "SET", "s", "v"))
	_, err := e.Do(ctxT(t), s, [][]byte{[]byte("SET"), []byte("t"), []byte("v")})
	require.ErrorIs(t, err, server.ErrLimit)
	assert.Equal(t, replyOK, do(t, e, s, "SET", "s", "again"), "an existing key may still be written")
	assert.Equal(t, Int(1), do(t, e, s, "DEL", "h"))
	assert.Equal(t, replyOK, do(t, e, s, "SET", "t", "v"))
}

// With --redlock-multi-endpoint a same-value acquire is the same grant, a
// compare-then-delete is that value's remembered release (repeated, it
// succeeds), and the value cannot take the key again.
func TestRedlockMultiEndpoint(t *testing.T) {
	e, _ := newEngine(t, Config{RedlockMultiEndpoint: true})
	s := &Session{}
	release := `if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`
	acquireAll := `for i, key in ipairs(KEYS) do if redis.call("exists", key) == 1 then return 0 end end
for i, key in ipairs(KEYS) do redis.call("set", key, ARGV[1], "PX", ARGV[2]) end return #KEYS`
	assert.Equal(t, replyOK, do(t, e, s, "SET", "k", "v1", "NX", "PX", "10000"))
	assert.Equal(t, replyOK, do(t, e, s, "SET", "k", "v1", "NX", "PX", "10000"), "the same value again: the same grant")
	assert.Equal(t, Nil{}, do(t, e, s, "SET", "k", "v2", "NX", "PX", "10000"))
	assert.Equal(t, Int(1), do(t, e, s, "EVAL", release, "1", "k", "v1"))
	assert.Equal(t, Int(1), do(t, e, s, "EVAL", release, "1", "k", "v1"), "a repeated release succeeds")
	assert.Equal(t, Int(0), do(t, e, s, "EVAL", release, "1", "k", "v2"))
	assert.Equal(t, Nil{}, do(t, e, s, "SET", "k", "v1", "NX", "PX", "10000"), "a delayed acquire cannot bring it back")
	assert.Equal(t, replyOK, do(t, e, s, "SET", "k", "v3", "NX", "PX", "10000"))
	assert.Equal(t, Int(2), do(t, e, s, "EVAL", acquireAll, "2", "a", "b", "w", "5000"))
	assert.Equal(t, Int(2), do(t, e, s, "EVAL", acquireAll, "2", "a", "b", "w", "5000"), "node-redlock's acquire, repeated by its value")
	assert.Equal(t, Int(0), do(t, e, s, "EVAL", acquireAll, "2", "a", "b", "x", "5000"))
}

// A node error (not the leader, a limit) is returned as an error, not a reply.
func TestNodeErrorsAreErrors(t *testing.T) {
	e, n := newEngine(t, Config{})
	require.NoError(t, n.Close())
	_, err := e.Do(ctxT(t), &Session{}, [][]byte{[]byte("GET"), []byte("k")})
	require.Error(t, err)
	assert.True(t, errors.Is(err, server.ErrShutdown), "%v", err)
}
