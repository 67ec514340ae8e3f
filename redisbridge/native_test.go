package redisbridge

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/fencerlock/fencer/internal/resp"
	"github.com/fencerlock/fencer/server"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// startBridge runs a real node and a bridge on loopback, with the node's
// and the bridge's configurations changed by nodeEdit and edit where they
// are not nil, and returns the bridge's address and the node.
func startBridge(t testing.TB, nodeEdit func(*server.Config), edit func(*Config)) (string, *server.Node) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	cfg := server.DefaultConfig()
	cfg.DataDir, cfg.RaftAddr, cfg.ClientAddr = t.TempDir(), "127.0.0.1:0", ln.Addr().String()
	cfg.RaftLogLevel, cfg.Logger = "error", quiet
	if nodeEdit != nil {
		nodeEdit(&cfg)
	}
	node, err := server.Open(cfg)
	require.NoError(t, err)
	bcfg := DefaultConfig()
	bcfg.Logger = quiet
	if edit != nil {
		edit(&bcfg)
	}
	b, err := New(node, bcfg)
	require.NoError(t, err)
	go func() { _ = b.Serve(ln) }()
	t.Cleanup(func() {
		_ = b.Close()
		_ = node.Close()
	})
	return ln.Addr().String(), node
}

func newClient(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, ReadTimeout: 15 * time.Second, DisableIdentity: true})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func do(t *testing.T, c *redis.Client, args ...any) (any, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return c.Do(ctx, args...).Result()
}

func TestNativeReplies(t *testing.T) {
	addr, _ := startBridge(t, nil, nil)
	c := newClient(t, addr)

	got, err := do(t, c, "FENCE.ACQUIRE", "a", "me", 10000)
	require.NoError(t, err)
	grant := got.([]any)
	require.Len(t, grant, 2)
	tok := grant[0].(int64)
	assert.Positive(t, tok)
	assert.Equal(t, int64(10000), grant[1])

	_, err = do(t, c, "FENCE.ACQUIRE", "a", "you", 10000)
	assert.Equal(t, redis.Nil, err, "second owner gets null")

	got, err = do(t, c, "FENCE.STATUS", "a")
	require.NoError(t, err)
	st := got.([]any)
	assert.Equal(t, "me", st[0])
	assert.Equal(t, tok, st[1])
	assert.InDelta(t, 10000, st[2], 1000)

	got, err = do(t, c, "FENCE.TOKEN", "a")
	require.NoError(t, err)
	assert.Equal(t, tok, got)

	for _, tc := range []struct {
		args []any
		want int64
	}{
		{[]any{"FENCE.CHECK", "a", tok}, 1},
		{[]any{"FENCE.CHECK", "a", tok + 100}, 0},
		{[]any{"FENCE.EXTEND", "a", "me", 20000}, 1},
		{[]any{"FENCE.EXTEND", "a", "you", 20000}, 0},
		{[]any{"FENCE.RELEASE", "a", "you"}, 0},
		{[]any{"FENCE.RELEASE", "a", "me"}, 1},
		{[]any{"FENCE.RELEASE", "a", "me"}, 1},
		{[]any{"FENCE.CHECK", "a", tok}, 0},
	} {
		got, err := do(t, c, tc.args...)
		require.NoError(t, err, "%v", tc.args)
		assert.Equal(t, tc.want, got, "%v", tc.args)
	}
	_, err = do(t, c, "FENCE.STATUS", "a")
	assert.Equal(t, redis.Nil, err)
	_, err = do(t, c, "FENCE.TOKEN", "a")
	assert.Equal(t, redis.Nil, err)

	// you released (gave up) while me held: nothing more is granted to it.
	_, err = do(t, c, "FENCE.ACQUIRE", "a", "you", 10000)
	assert.Equal(t, redis.Nil, err, "an owner that gave up the key gets null after")
	got, err = do(t, c, "FENCE.ACQUIRE", "a", "them", 10000)
	require.NoError(t, err)
	assert.Greater(t, got.([]any)[0].(int64), tok, "next owner's token is larger")

	got, err = do(t, c, "FENCE.REVOKE", "a")
	require.NoError(t, err)
	assert.Equal(t, int64(1), got)
	got, err = do(t, c, "FENCE.REVOKE", "a")
	require.NoError(t, err)
	assert.Equal(t, int64(0), got)

	got, err = do(t, c, "FENCE.LEADER")
	require.NoError(t, err)
	assert.Len(t, got.([]any), 2)

	got, err = do(t, c, "PING")
	require.NoError(t, err)
	assert.Equal(t, "PONG", got)
	got, err = do(t, c, "PING", "hi")
	require.NoError(t, err)
	assert.Equal(t, "hi", got)
}

func TestBadRequestsKeepTheConnection(t *testing.T) {
	addr, _ := startBridge(t, nil, nil)
	c := newClient(t, addr)
	for _, tc := range []struct {
		args []any
		want string
	}{
		{[]any{"FENCE.ACQUIRE", "a", "me"}, "ERR wrong number of arguments for 'fence.acquire' command"},
		{[]any{"FENCE.ACQUIRE", "a", "me", "ten"}, "ERR invalid argument: ttl: want a whole number of milliseconds, got 'ten'"},
		{[]any{"FENCE.ACQUIRE", "a", "me", "10s"}, "ERR invalid argument: ttl: want a whole number of milliseconds, got '10s'"},
		{[]any{"FENCE.ACQUIRE", "a", "me", "-5"}, "ERR invalid argument: ttl: want a whole number of milliseconds, got '-5'"},
		{[]any{"FENCE.ACQUIRE", "a", "me", "1000", "WAIT"}, "ERR wrong number of arguments for 'fence.acquire' command"},
		{[]any{"FENCE.ACQUIRE", "a", "me", "1000", "WIAT", "5"}, "ERR invalid argument: option: 'WIAT' is not one here: want WAIT ms, SESSION id or VALUE v, each once"},
		{[]any{"FENCE.ACQUIRE", "a", "me", "1000", "WAIT", "x"}, "ERR invalid argument: wait: want a whole number of milliseconds, got 'x'"},
		{[]any{"FENCE.ACQUIRE", "a", "me", "10"}, "ERR invalid argument: ttl: 10ms is outside 100ms..24h0m0s"},
		{[]any{"FENCE.ACQUIRE", "", "me", "1000"}, "ERR invalid argument: key: empty"},
		{[]any{"FENCE.EXTEND", "a", "me"}, "ERR wrong number of arguments for 'fence.extend' command"},
		{[]any{"FENCE.RELEASE", "a"}, "ERR wrong number of arguments for 'fence.release' command"},
		{[]any{"FENCE.CHECK", "a", "-1"}, "ERR invalid argument: token: want a fencing token (a whole number), got '-1'"},
		{[]any{"FENCE.STATUS"}, "ERR wrong number of arguments for 'fence.status' command"},
		{[]any{"FENCE.LEADER", "x"}, "ERR wrong number of arguments for 'fence.leader' command"},
		{[]any{"NOSUCH", "x", "y"}, "ERR unknown command 'NOSUCH', with args beginning with: 'x' 'y' "},
	} {
		_, err := do(t, c, tc.args...)
		require.Error(t, err, "%v", tc.args)
		assert.Equal(t, tc.want, err.Error(), "%v", tc.args)
		got, err := do(t, c, "PING")
		require.NoError(t, err, "connection usable after %v", tc.args)
		assert.Equal(t, "PONG", got)
	}
	_, err := do(t, c, "FENCE.STATUS", "a")
	assert.Equal(t, redis.Nil, err, "nothing was granted by bad requests")
}

func TestWaitOverRESPIsFIFO(t *testing.T) {
	addr, _ := startBridge(t, nil, nil)
	holder := newClient(t, addr)
	_, err := do(t, holder, "FENCE.ACQUIRE", "q", "h", 30000)
	require.NoError(t, err)

	type res struct {
		owner string
		token int64
		err   error
	}
	out := make(chan res, 3)
	for i := 1; i <= 3; i++ {
		owner := fmt.Sprintf("w%d", i)
		c := newClient(t, addr)
		go func() {
			got, err := do(t, c, "FENCE.ACQUIRE", "q", owner, 30000, "WAIT", 10000)
			if err != nil {
				out <- res{owner: owner, err: err}
				return
			}
			out <- res{owner: owner, token: got.([]any)[0].(int64)}
		}()
		// Let each waiter reach the queue before the next one is sent.
		time.Sleep(300 * time.Millisecond)
	}
	prev := "h"
	var prevTok int64
	for i := 1; i <= 3; i++ {
		got, err := do(t, holder, "FENCE.RELEASE", "q", prev)
		require.NoError(t, err)
		require.Equal(t, int64(1), got)
		r := <-out
		require.NoError(t, r.err)
		require.Equal(t, fmt.Sprintf("w%d", i), r.owner)
		require.Greater(t, r.token, prevTok)
		prev, prevTok = r.owner, r.token
	}
}

func TestWaitTimesOutWithNull(t *testing.T) {
	addr, _ := startBridge(t, nil, nil)
	c := newClient(t, addr)
	_, err := do(t, c, "FENCE.ACQUIRE", "k", "h", 30000)
	require.NoError(t, err)
	start := time.Now()
	_, err = do(t, c, "FENCE.ACQUIRE", "k", "w", 30000, "WAIT", 400)
	assert.Equal(t, redis.Nil, err)
	assert.GreaterOrEqual(t, time.Since(start), 400*time.Millisecond)
	assert.Less(t, time.Since(start), 5*time.Second)
}

// A client that hangs up while it waits leaves the queue: the next release
// hands the lock to the waiter behind it, not to the one that left.
func TestHangupLeavesTheQueue(t *testing.T) {
	addr, _ := startBridge(t, nil, nil)
	holder := newClient(t, addr)
	_, err := do(t, holder, "FENCE.ACQUIRE", "k", "h", 30000)
	require.NoError(t, err)

	raw, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	_, err = raw.Write(resp.Command("FENCE.ACQUIRE", "k", "gone", "30000", "WAIT", "20000"))
	require.NoError(t, err)
	time.Sleep(300 * time.Millisecond)

	second := newClient(t, addr)
	got := make(chan any, 1)
	go func() {
		v, err := do(t, second, "FENCE.ACQUIRE", "k", "stays", 30000, "WAIT", 10000)
		if err != nil {
			got <- err
			return
		}
		got <- v
	}()
	time.Sleep(300 * time.Millisecond)
	require.NoError(t, raw.Close())
	time.Sleep(300 * time.Millisecond) // more than the hang-up poll

	v, err := do(t, holder, "FENCE.RELEASE", "k", "h")
	require.NoError(t, err)
	require.Equal(t, int64(1), v)
	select {
	case v := <-got:
		require.IsType(t, []any{}, v, "got %v", v)
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter behind the one that hung up was not granted")
	}
	st, err := do(t, holder, "FENCE.STATUS", "k")
	require.NoError(t, err)
	assert.Equal(t, "stays", st.([]any)[0])
}

func TestPipelinedCommandsAnswerInOrder(t *testing.T) {
	addr, _ := startBridge(t, nil, nil)
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	_, err = io.WriteString(conn, "PING\r\nFENCE.ACQUIRE p me 5000\r\nFENCE.ACQUIRE p you 5000\r\nFENCE.RELEASE p me\r\nQUIT\r\n")
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	all, err := io.ReadAll(bufio.NewReader(conn))
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(all)), "\r\n")
	require.GreaterOrEqual(t, len(lines), 6, "%q", all)
	assert.Equal(t, "+PONG", lines[0])
	assert.Equal(t, "*2", lines[1])
	assert.Equal(t, ":5000", lines[3])
	assert.Equal(t, "$-1", lines[4])
	assert.Equal(t, ":1", lines[5])
	assert.Equal(t, "+OK", lines[len(lines)-1])
}

func TestStateHashChangesWithTheTable(t *testing.T) {
	addr, _ := startBridge(t, nil, nil)
	c := newClient(t, addr)
	_, err := do(t, c, "FENCE.ACQUIRE", "h", "me", 10000)
	require.NoError(t, err)
	// The new leader records its client address in an entry of its own,
	// proposed after it is ready, so that entry may land between two reads:
	// read until the applied index holds still, and at the same index the
	// hash must be the same.
	var pair []any
	deadline := time.Now().Add(5 * time.Second)
	for {
		first, err := do(t, c, "FENCE.STATEHASH")
		require.NoError(t, err)
		again, err := do(t, c, "FENCE.STATEHASH")
		require.NoError(t, err)
		pair = first.([]any)
		assert.Positive(t, pair[0].(int64))
		assert.Regexp(t, "^[0-9a-f]{64}$", pair[1])
		if pair[0] == again.([]any)[0] {
			assert.Equal(t, first, again, "same table, same hash")
			break
		}
		require.True(t, time.Now().Before(deadline), "the applied index kept moving")
	}
	_, err = do(t, c, "FENCE.RELEASE", "h", "me")
	require.NoError(t, err)
	after, err := do(t, c, "FENCE.STATEHASH")
	require.NoError(t, err)
	assert.NotEqual(t, pair[1], after.([]any)[1])
}
