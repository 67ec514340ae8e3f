package redisbridge

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/fencerlock/fencer/internal/resp"
	"github.com/fencerlock/fencer/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pevent is a fence.pevent message as the test compares it.
type pevent struct {
	prefix string
	event
}

func (rc *watchConn) readPrefixEvent(frame resp.Kind) pevent {
	rc.t.Helper()
	v := rc.read()
	require.Equal(rc.t, frame, v.Kind, "frame of %v", v)
	require.Len(rc.t, v.Elems, 8, "%v", v)
	require.Equal(rc.t, "fence.pevent", v.Elems[0].Str)
	return pevent{v.Elems[1].Str, event{kind: v.Elems[3].Str, key: v.Elems[2].Str, owner: v.Elems[5].Str,
		pos: v.Elems[4].Int, token: v.Elems[6].Int, value: v.Elems[7].Str}}
}

// FENCE.WATCH PREFIX p pushes every change of every key under p, each
// naming its key and the prefix, in position order; FROM resumes; a key
// watch and a prefix watch of the same key are two streams; FENCE.UNWATCH
// PREFIX p ends it.
func TestWatchPrefixRESP(t *testing.T) {
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprint("RESP", proto), func(t *testing.T) {
			frame := resp.Array
			addr, _ := startBridge(t, nil, nil)
			c := newClient(t, addr)
			w := dialWatch(t, addr)
			if proto == 3 {
				frame = resp.Push
				w.send("HELLO", 3)
				require.Equal(t, resp.Map, w.read().Kind)
			}
			w.send("FENCE.WATCH", "PREFIX", "app:")
			w.readConfirm(frame, "fence.pwatch", "app:", 1)
			reset := w.readPrefixEvent(frame)
			assert.Equal(t, pevent{"app:", event{kind: "reset", pos: reset.pos}}, reset, "a prefix's reset names no key")

			tok := func(key, owner string) int64 {
				got, err := do(t, c, "FENCE.ACQUIRE", key, owner, 10000)
				require.NoError(t, err)
				return got.([]any)[0].(int64)
			}
			t1 := tok("app:1", "a")
			tok("other", "b")
			t2 := tok("app:2", "c")
			_, err := do(t, c, "FENCE.RELEASE", "app:1", "a")
			require.NoError(t, err)
			assert.Equal(t, pevent{"app:", event{"granted", "app:1", "a", t1, t1, ""}}, w.readPrefixEvent(frame))
			assert.Equal(t, pevent{"app:", event{"granted", "app:2", "c", t2, t2, ""}}, w.readPrefixEvent(frame))
			rel := w.readPrefixEvent(frame)
			assert.Equal(t, pevent{"app:", event{"released", "app:1", "a", rel.pos, t1, ""}}, rel)

			// A key watch beside it: its own messages.
			w.send("FENCE.WATCH", "app:2")
			w.readConfirm(frame, "fence.watch", "app:2", 2)
			assert.Equal(t, "reset", w.readEvent(frame).kind)
			_, err = do(t, c, "FENCE.RELEASE", "app:2", "c")
			require.NoError(t, err)
			// Two pumps: either may write first.
			var ke event
			var pe pevent
			for range 2 {
				v := w.read()
				require.Equal(t, frame, v.Kind)
				switch v.Elems[0].Str {
				case "fence.event":
					ke = event{kind: v.Elems[2].Str, key: v.Elems[1].Str, owner: v.Elems[4].Str, pos: v.Elems[3].Int, token: v.Elems[5].Int, value: v.Elems[6].Str}
				case "fence.pevent":
					pe = pevent{v.Elems[1].Str, event{kind: v.Elems[3].Str, key: v.Elems[2].Str, owner: v.Elems[5].Str, pos: v.Elems[4].Int, token: v.Elems[6].Int, value: v.Elems[7].Str}}
				}
			}
			assert.Equal(t, event{"released", "app:2", "c", ke.pos, t2, ""}, ke)
			assert.Equal(t, pevent{"app:", ke}, pe)

			// Resumed from just before the first grant: the history again.
			w.send("FENCE.WATCH", "prefix", "app:", "FROM", t1-1)
			w.readConfirm(frame, "fence.pwatch", "app:", 2)
			assert.Equal(t, int64(t1), w.readPrefixEvent(frame).pos)
			assert.Equal(t, int64(t2), w.readPrefixEvent(frame).pos)
			assert.Equal(t, rel, w.readPrefixEvent(frame))
			assert.Equal(t, pe, w.readPrefixEvent(frame))
			w.noMore()

			w.send("FENCE.UNWATCH", "PREFIX", "app:")
			w.readConfirm(frame, "fence.punwatch", "app:", 1)
			w.send("FENCE.UNWATCH")
			w.readConfirm(frame, "fence.unwatch", "app:2", 0)
			tok("app:3", "d")
			w.send("PING")
			assert.Equal(t, "PONG", w.read().Str, "nothing watched: no event before the reply")
		})
	}
}

// The prefix form is told apart by its count of arguments: a key named
// PREFIX is watched as before, FROM or not, and unwatched with its
// arguments in another order.
func TestWatchPrefixAndAKeyNamedPrefix(t *testing.T) {
	addr, _ := startBridge(t, nil, nil)
	c := newClient(t, addr)
	w := dialWatch(t, addr)
	w.send("FENCE.WATCH", "PREFIX")
	w.readConfirm(resp.Array, "fence.watch", "PREFIX", 1)
	r := w.readEvent(resp.Array)
	assert.Equal(t, event{kind: "reset", key: "PREFIX", pos: r.pos}, r)
	w.send("FENCE.WATCH", "PREFIX", "FROM", 0)
	w.readConfirm(resp.Array, "fence.watch", "PREFIX", 1)
	w.send("FENCE.WATCH", "PREFIX", "FROM")
	w.readConfirm(resp.Array, "fence.pwatch", "FROM", 2)
	assert.Equal(t, "reset", w.readPrefixEvent(resp.Array).kind)
	got, err := do(t, c, "FENCE.ACQUIRE", "PREFIX", "a", 10000)
	require.NoError(t, err)
	tok := got.([]any)[0].(int64)
	assert.Equal(t, event{"granted", "PREFIX", "a", tok, tok, ""}, w.readEvent(resp.Array))
	w.noMore()
	w.send("FENCE.UNWATCH", "x", "PREFIX")
	w.readConfirm(resp.Array, "fence.unwatch", "x", 2)
	w.readConfirm(resp.Array, "fence.unwatch", "PREFIX", 1)
	w.send("FENCE.UNWATCH", "PREFIX", "FROM")
	w.readConfirm(resp.Array, "fence.punwatch", "FROM", 0)
}

// A user limited to app:* may watch the prefix "" and is sent only the
// events of app:* names; a reset names none; COMMAND says FENCE.WATCH's
// keys move.
func TestWatchPrefixShowsOnlyTheUsersNames(t *testing.T) {
	addr, _ := startBridge(t, nil, withAuth)
	admin := dialRaw(t, addr)
	require.Equal(t, "+OK\r\n", admin.do("AUTH", "default", "sekret"))
	w := dialWatch(t, addr)
	w.send("AUTH", "alice", "apw")
	require.Equal(t, "OK", w.read().Str)
	w.send("FENCE.WATCH", "PREFIX", "")
	w.readConfirm(resp.Array, "fence.pwatch", "", 1)
	r := w.readPrefixEvent(resp.Array)
	assert.Equal(t, pevent{"", event{kind: "reset", pos: r.pos}}, r)
	for _, k := range []string{"other:1", "app:1", "zzz", "app:2"} {
		require.True(t, strings.HasPrefix(admin.do("FENCE.ACQUIRE", k, "o", "10000"), "*2\r\n"))
	}
	assert.Equal(t, "app:1", w.readPrefixEvent(resp.Array).key)
	assert.Equal(t, "app:2", w.readPrefixEvent(resp.Array).key)
	w.noMore()
	// The key form still checks its key.
	w.send("FENCE.WATCH", "other:1")
	v := w.read()
	require.Equal(t, resp.Error, v.Kind)
	assert.Equal(t, strings.TrimSuffix(strings.TrimPrefix(string(errorLine(noPermKey)), "-"), "\r\n"), v.Str)

	info := admin.do("COMMAND", "INFO", "fence.watch")
	assert.Contains(t, info, "movablekeys")
	assert.Contains(t, info, ":-2\r\n")
}

// Limits: prefixes per connection, prefix watches per node, and a prefix
// longer than a key may be.
func TestWatchPrefixLimits(t *testing.T) {
	addr, _ := startBridge(t, func(c *server.Config) { c.MaxPrefixWatches = maxConnPrefixWatches + 1; c.MaxKeyLen = 16 }, nil)
	w := dialWatch(t, addr)
	for i := 0; i < maxConnPrefixWatches; i++ {
		w.send("FENCE.WATCH", "PREFIX", fmt.Sprint("p", i, ":"))
		w.readConfirm(resp.Array, "fence.pwatch", fmt.Sprint("p", i, ":"), int64(i+1))
		assert.Equal(t, "reset", w.readPrefixEvent(resp.Array).kind)
	}
	w.send("FENCE.WATCH", "PREFIX", "more:")
	v := w.read()
	require.Equal(t, resp.Error, v.Kind)
	assert.Equal(t, fmt.Sprintf("ERR too many prefix watches on this connection: at most %d; FENCE.UNWATCH PREFIX p first", maxConnPrefixWatches), v.Str)
	w.send("FENCE.WATCH", "PREFIX", "p0:")
	w.readConfirm(resp.Array, "fence.pwatch", "p0:", maxConnPrefixWatches)
	w.readPrefixEvent(resp.Array)

	w2 := dialWatch(t, addr)
	w2.send("FENCE.WATCH", "PREFIX", "x")
	w2.readConfirm(resp.Array, "fence.pwatch", "x", 1)
	w2.readPrefixEvent(resp.Array)
	w3 := dialWatch(t, addr)
	for _, tc := range []struct {
		args []any
		want string
	}{
		{[]any{"FENCE.WATCH", "PREFIX", "y"}, fmt.Sprintf("ERR limit reached: the node serves its maximum of %d prefix watches", maxConnPrefixWatches+1)},
		{[]any{"FENCE.WATCH", "PREFIX", strings.Repeat("y", 17)}, "ERR invalid argument: prefix: 17 bytes, over the limit of 16"},
		{[]any{"FENCE.WATCH", "PREFIX", "y", "FROM", "x"}, "ERR invalid argument: from: want a log position (a whole number), got 'x'"},
		{[]any{"FENCE.WATCH", "PREFIX", "y", "AFTER", 3}, "ERR invalid argument: option: 'AFTER' is not one here: want FROM position"},
		{[]any{"FENCE.WATCH", "PREFIX", "y", "FROM", 3, 4}, "ERR wrong number of arguments for 'fence.watch' command"},
	} {
		w3.send(tc.args...)
		v := w3.read()
		require.Equal(t, resp.Error, v.Kind, "%v: %v", tc.args, v)
		assert.Regexp(t, "^"+regexp.QuoteMeta(tc.want), v.Str, "%v", tc.args)
	}
}
