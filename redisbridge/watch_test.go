package redisbridge

import (
	"bufio"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/fencerlock/fencer/internal/resp"
	"github.com/fencerlock/fencer/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// watchConn is a RESP connection whose replies and pushes a test reads one
// by one.
type watchConn struct {
	t  *testing.T
	c  net.Conn
	rd *bufio.Reader
}

func dialWatch(t *testing.T, addr string) *watchConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return &watchConn{t: t, c: c, rd: bufio.NewReader(c)}
}

func (rc *watchConn) send(args ...any) {
	rc.t.Helper()
	bs := make([][]byte, len(args))
	for i, a := range args {
		bs[i] = []byte(fmt.Sprint(a))
	}
	_, err := rc.c.Write(resp.AppendCommand(nil, bs...))
	require.NoError(rc.t, err)
}

func (rc *watchConn) read() resp.Value {
	rc.t.Helper()
	require.NoError(rc.t, rc.c.SetReadDeadline(time.Now().Add(5*time.Second)))
	v, err := resp.ReadValue(rc.rd)
	require.NoError(rc.t, err)
	return v
}

// noMore asserts that nothing arrives for a while.
func (rc *watchConn) noMore() {
	rc.t.Helper()
	require.NoError(rc.t, rc.c.SetReadDeadline(time.Now().Add(200*time.Millisecond)))
	v, err := resp.ReadValue(rc.rd)
	require.Error(rc.t, err, "unexpected %v", v)
}

// event is a fence.event message as the test compares it.
type event struct {
	kind, key, owner string
	pos, token       int64
	value            string
}

// readEvent reads a fence.event of the expected frame kind.
func (rc *watchConn) readEvent(frame resp.Kind) event {
	rc.t.Helper()
	v := rc.read()
	require.Equal(rc.t, frame, v.Kind, "frame of %v", v)
	require.Len(rc.t, v.Elems, 7, "%v", v)
	require.Equal(rc.t, "fence.event", v.Elems[0].Str)
	return event{kind: v.Elems[2].Str, key: v.Elems[1].Str, owner: v.Elems[4].Str, pos: v.Elems[3].Int, token: v.Elems[5].Int, value: v.Elems[6].Str}
}

func (rc *watchConn) readConfirm(frame resp.Kind, word, key string, n int64) {
	rc.t.Helper()
	v := rc.read()
	require.Equal(rc.t, frame, v.Kind, "frame of %v", v)
	require.Len(rc.t, v.Elems, 3, "%v", v)
	assert.Equal(rc.t, word, v.Elems[0].Str)
	assert.Equal(rc.t, key, v.Elems[1].Str)
	assert.Equal(rc.t, n, v.Elems[2].Int)
}

func TestWatchRESP2(t *testing.T) {
	addr, _ := startBridge(t, nil, nil)
	c := newClient(t, addr)
	w := dialWatch(t, addr)
	w.send("FENCE.WATCH", "k")
	w.readConfirm(resp.Array, "fence.watch", "k", 1)
	reset := w.readEvent(resp.Array)
	assert.Equal(t, event{kind: "reset", key: "k", pos: reset.pos}, reset)

	got, err := do(t, c, "FENCE.ACQUIRE", "k", "a", 10000)
	require.NoError(t, err)
	tok := got.([]any)[0].(int64)
	assert.Equal(t, event{"granted", "k", "a", tok, tok, ""}, w.readEvent(resp.Array))
	_, err = do(t, c, "FENCE.EXTEND", "k", "a", 10000)
	require.NoError(t, err)
	_, err = do(t, c, "FENCE.RELEASE", "k", "a")
	require.NoError(t, err)
	rel := w.readEvent(resp.Array)
	assert.Equal(t, event{"released", "k", "a", rel.pos, tok, ""}, rel)
	assert.Greater(t, rel.pos, tok)

	// Subscribe mode's rules: other commands are refused while watching.
	w.send("GET", "k")
	v := w.read()
	require.Equal(t, resp.Error, v.Kind)
	assert.Equal(t, "ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context", v.Str, "Redis's words")
	w.send("PING")
	assert.Equal(t, "PONG", w.read().Str)

	// A second key, and a watch resumed from a position.
	w.send("FENCE.WATCH", "k2", "FROM", 0)
	w.readConfirm(resp.Array, "fence.watch", "k2", 2)
	w.send("FENCE.WATCH", "k", "FROM", tok-1)
	w.readConfirm(resp.Array, "fence.watch", "k", 2)
	assert.Equal(t, event{"granted", "k", "a", tok, tok, ""}, w.readEvent(resp.Array))
	assert.Equal(t, rel, w.readEvent(resp.Array))
	w.noMore()

	w.send("FENCE.UNWATCH", "k")
	w.readConfirm(resp.Array, "fence.unwatch", "k", 1)
	w.send("FENCE.UNWATCH")
	w.readConfirm(resp.Array, "fence.unwatch", "k2", 0)
	_, err = do(t, c, "FENCE.ACQUIRE", "k", "b", 10000)
	require.NoError(t, err)
	w.send("GET", "k")
	assert.Equal(t, "b", w.read().Str, "no event after the unwatch, and commands are served again")
}

func TestWatchRESP3(t *testing.T) {
	addr, _ := startBridge(t, nil, nil)
	c := newClient(t, addr)
	got, err := do(t, c, "FENCE.ACQUIRE", "k", "a", 10000)
	require.NoError(t, err)
	tok := got.([]any)[0].(int64)

	w := dialWatch(t, addr)
	w.send("HELLO", 3)
	require.Equal(t, resp.Map, w.read().Kind)
	w.send("FENCE.WATCH", "k")
	w.readConfirm(resp.Push, "fence.watch", "k", 1)
	reset := w.readEvent(resp.Push)
	assert.Equal(t, event{"reset", "k", "a", reset.pos, tok, ""}, reset)
	assert.GreaterOrEqual(t, reset.pos, tok)

	// Other commands are served between the pushes.
	w.send("GET", "k")
	assert.Equal(t, "a", w.read().Str)
	_, err = do(t, c, "FENCE.REVOKE", "k")
	require.NoError(t, err)
	rev := w.readEvent(resp.Push)
	assert.Equal(t, event{"revoked", "k", "a", rev.pos, tok, ""}, rev)

	// A Redis SET NX is a grant, its DEL a revoke.
	_, err = do(t, c, "SET", "k", "v", "NX", "PX", 10000)
	require.NoError(t, err)
	g := w.readEvent(resp.Push)
	assert.Equal(t, event{"granted", "k", "v", g.pos, g.pos, ""}, g)
	_, err = do(t, c, "DEL", "k")
	require.NoError(t, err)
	assert.Equal(t, "revoked", w.readEvent(resp.Push).kind)

	w.send("RESET")
	assert.Equal(t, "RESET", w.read().Str)
	_, err = do(t, c, "FENCE.ACQUIRE", "k", "b", 10000)
	require.NoError(t, err)
	w.send("PING")
	assert.Equal(t, "PONG", w.read().Str, "RESET ended the watch")
}

func TestWatchArgumentsAndLimits(t *testing.T) {
	addr, _ := startBridge(t, func(c *server.Config) { c.MaxWatches = 2 }, nil)
	w := dialWatch(t, addr)
	for _, tc := range []struct {
		args []any
		want string
	}{
		{[]any{"FENCE.WATCH"}, "ERR wrong number of arguments for 'fence.watch' command"},
		{[]any{"FENCE.WATCH", "k", "FROM"}, "ERR wrong number of arguments for 'fence.watch' command"},
		{[]any{"FENCE.WATCH", "k", "AFTER", 3}, "ERR invalid argument: option: 'AFTER' is not one here: want FROM position"},
		{[]any{"FENCE.WATCH", "k", "FROM", -3}, "ERR invalid argument: from: want a log position (a whole number), got '-3'"},
		{[]any{"FENCE.WATCH", "", "FROM", 3}, "ERR invalid argument: key: empty"},
	} {
		w.send(tc.args...)
		v := w.read()
		require.Equal(t, resp.Error, v.Kind, "%v: %v", tc.args, v)
		assert.Equal(t, tc.want, v.Str)
	}
	w.send("FENCE.UNWATCH", "x")
	w.readConfirm(resp.Array, "fence.unwatch", "x", 0)

	w.send("FENCE.WATCH", "a")
	w.readConfirm(resp.Array, "fence.watch", "a", 1)
	assert.Equal(t, "reset", w.readEvent(resp.Array).kind)
	w2 := dialWatch(t, addr)
	w2.send("FENCE.WATCH", "b")
	w2.readConfirm(resp.Array, "fence.watch", "b", 1)
	w2.readEvent(resp.Array)
	w3 := dialWatch(t, addr)
	w3.send("FENCE.WATCH", "c")
	v := w3.read()
	require.Equal(t, resp.Error, v.Kind)
	assert.Regexp(t, "^ERR limit reached: the node serves its maximum of 2 watches", v.Str)

	// A connection that closes ends its watches.
	_ = w2.c.Close()
	require.Eventually(t, func() bool {
		w3.send("FENCE.WATCH", "c")
		v := w3.read()
		return v.Kind == resp.Array
	}, 5*time.Second, 50*time.Millisecond)
}

func TestWatchConnectionLimit(t *testing.T) {
	addr, _ := startBridge(t, nil, nil)
	w := dialWatch(t, addr)
	var buf []byte
	for i := 0; i < maxConnWatches+1; i++ {
		buf = resp.AppendCommand(buf, []byte("FENCE.WATCH"), []byte(fmt.Sprint("k", i)))
	}
	_, err := w.c.Write(buf)
	require.NoError(t, err)
	// The resets come as the watches start, between the replies.
	confirmed, resets := 0, 0
	var refusals []string
	for i := 0; i < 2*maxConnWatches+1; i++ {
		switch v := w.read(); {
		case v.Kind == resp.Error:
			refusals = append(refusals, v.Str)
		case v.Elems[0].Str == "fence.watch":
			confirmed++
		default:
			resets++
		}
	}
	assert.Equal(t, maxConnWatches, confirmed)
	assert.Equal(t, maxConnWatches, resets)
	assert.Equal(t, []string{fmt.Sprintf("ERR too many watches on this connection: at most %d; FENCE.UNWATCH a key first", maxConnWatches)}, refusals)
}
