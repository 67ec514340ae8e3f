package integration

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestQuickStartWithRedisCLI follows the README's first steps with the real
// redis-cli.
func TestQuickStartWithRedisCLI(t *testing.T) {
	d := startFencerd(t)

	first := cli(t, d, "FENCE.ACQUIRE", "a", "me", "10000")
	require.Len(t, first, 2, "a grant is [token, ttl-ms]: %q", first)
	tok1, err := strconv.ParseUint(first[0], 10, 64)
	require.NoError(t, err, "token %q", first[0])
	assert.Positive(t, tok1)
	assert.Equal(t, "10000", first[1])

	assert.Equal(t, []string{""}, cli(t, d, "FENCE.ACQUIRE", "a", "you", "10000"),
		"a lock held by another owner answers nil (an empty line)")
	assert.Equal(t, []string{"1"}, cli(t, d, "FENCE.RELEASE", "a", "me"))

	second := cli(t, d, "FENCE.ACQUIRE", "a", "you", "10000")
	require.Len(t, second, 2, "%q", second)
	tok2, err := strconv.ParseUint(second[0], 10, 64)
	require.NoError(t, err, "token %q", second[0])
	assert.Greater(t, tok2, tok1, "the next grant's token is larger")
	assert.Equal(t, "10000", second[1])

	assert.Equal(t, []string{"you", strconv.FormatUint(tok2, 10)}, cli(t, d, "FENCE.STATUS", "a")[:2])
}

// TestLeaseNotFreedEarlyAndFreedAfterTTL polls a 2 s lease with another
// owner's acquire: never granted before TTL after the holder sent its
// request, and granted within twice the TTL.
func TestLeaseNotFreedEarlyAndFreedAfterTTL(t *testing.T) {
	const ttl = 2 * time.Second
	d := startFencerd(t)
	holder, poller := newClient(t, d), newClient(t, d)
	// The timed part below measures leases, not start-up.
	warmUp(t, holder, poller)

	sent := time.Now()
	g, ok := acquire(t, holder, "ttl", "holder", ttl, 0)
	require.True(t, ok, "a free lock is granted")

	var polls int
	for {
		pollSent := time.Now()
		pg, granted := acquire(t, poller, "ttl", "poller", 10*time.Second, 0)
		answered := time.Now()
		polls++
		if granted {
			assert.False(t, answered.Before(sent.Add(ttl)),
				"granted to another owner %v after the holder sent its acquire; the TTL is %v", answered.Sub(sent), ttl)
			assert.False(t, answered.After(sent.Add(2*ttl)),
				"granted only %v after the holder sent its acquire; the TTL is %v", answered.Sub(sent), ttl)
			assert.Greater(t, pg.token, g.token)
			t.Logf("freed after %v (request sent) to %v (reply), %d polls", pollSent.Sub(sent), answered.Sub(sent), polls)
			break
		}
		require.False(t, answered.After(sent.Add(3*ttl)), "never freed: last poll answered %v after the acquire", answered.Sub(sent))
		time.Sleep(100 * time.Millisecond)
	}
	s, held := status(t, holder, "ttl")
	require.True(t, held)
	assert.Equal(t, "poller", s.owner)
}

// TestWaitersAreServedInArrivalOrder queues three waiters behind a holder and
// checks that each release hands the lock to the next one in the same
// commit, in the order they arrived.
func TestWaitersAreServedInArrivalOrder(t *testing.T) {
	// spacing separates the waiters' arrivals; each needs one commit before
	// it is queued, so this is a wide margin.
	const spacing = 500 * time.Millisecond
	const waitFor = 20 * time.Second
	d := startFencerd(t)
	holder, observer := newClient(t, d), newClient(t, d)

	hg, ok := acquire(t, holder, "q", "holder", 30*time.Second, 0)
	require.True(t, ok)

	type answer struct {
		g       grant
		granted bool
		err     error
	}
	owners := []string{"w1", "w2", "w3"}
	clients := make([]*redis.Client, len(owners))
	answers := make([]chan answer, len(owners))
	for i, owner := range owners {
		if i > 0 {
			time.Sleep(spacing)
		}
		clients[i] = newClient(t, d)
		answers[i] = make(chan answer, 1)
		go func(c *redis.Client, owner string, out chan<- answer) {
			g, granted, err := tryAcquire(c, "q", owner, 30*time.Second, waitFor)
			out <- answer{g, granted, err}
		}(clients[i], owner, answers[i])
	}
	time.Sleep(spacing)
	for i, owner := range owners {
		select {
		case a := <-answers[i]:
			t.Fatalf("%s was answered while the holder still held the lock: %+v", owner, a)
		default:
		}
	}

	prevOwner, prevClient, prevToken := "holder", holder, hg.token
	for i, owner := range owners {
		require.Equal(t, int64(1), release(t, prevClient, "q", prevOwner), "%s releases", prevOwner)
		// The release's commit granted the lock to the next waiter: there is
		// no moment at which it reads as free.
		s, held := status(t, observer, "q")
		require.True(t, held, "right after %s's release, q is held by %s", prevOwner, owner)
		assert.Equal(t, owner, s.owner, "right after %s's release", prevOwner)

		var a answer
		select {
		case a = <-answers[i]:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s was not answered within 10s of %s's release", owner, prevOwner)
		}
		require.NoError(t, a.err, owner)
		require.True(t, a.granted, "%s is granted", owner)
		assert.Greater(t, a.g.token, prevToken, "%s's token is larger than %s's", owner, prevOwner)
		assert.Equal(t, s.token, a.g.token, "STATUS shows %s's grant", owner)
		assert.Equal(t, int64(30000), a.g.ttlMS)
		for _, later := range answers[i+1:] {
			select {
			case la := <-later:
				t.Fatalf("a later waiter was answered before its turn: %+v", la)
			default:
			}
		}
		prevOwner, prevClient, prevToken = owner, clients[i], a.g.token
	}
	require.Equal(t, int64(1), release(t, prevClient, "q", prevOwner))
	_, held := status(t, observer, "q")
	assert.False(t, held, "free once the last waiter releases")
}

// TestWaiterGetsLockWhenLeaseExpires queues a waiter behind a 1.5 s lease
// that is never released: the lease's expiry hands the lock over.
func TestWaiterGetsLockWhenLeaseExpires(t *testing.T) {
	const ttl = 1500 * time.Millisecond
	d := startFencerd(t)
	holder, waiter := newClient(t, d), newClient(t, d)
	warmUp(t, holder, waiter)

	sent := time.Now()
	hg, ok := acquire(t, holder, "e", "holder", ttl, 0)
	require.True(t, ok)
	wg, granted := acquire(t, waiter, "e", "waiter", 10*time.Second, 10*time.Second)
	answered := time.Now()
	require.True(t, granted, "the waiter is granted when the holder's lease expires")
	took := answered.Sub(sent)
	t.Logf("waiter granted %v after the holder's acquire was sent (TTL %v)", took, ttl)
	assert.GreaterOrEqual(t, took, ttl, "the holder's lease ended early")
	assert.LessOrEqual(t, took, 2*ttl+time.Second, "the lease was not ended in time")
	assert.Greater(t, wg.token, hg.token)

	s, held := status(t, holder, "e")
	require.True(t, held)
	assert.Equal(t, "waiter", s.owner)
	assert.Equal(t, wg.token, s.token)
}

// TestBadInputKeepsConnectionUsable sends malformed commands over one raw
// connection: each gets an ERR reply and the connection still answers PING.
func TestBadInputKeepsConnectionUsable(t *testing.T) {
	d := startFencerd(t)
	rc := dialRESP(t, d)

	cases := []struct {
		name string
		args []string
		want string // prefix of the error reply
	}{
		{"acquire missing ttl", []string{"FENCE.ACQUIRE", "a", "me"}, "ERR wrong number of arguments for 'fence.acquire' command"},
		{"acquire too many args", []string{"FENCE.ACQUIRE", "a", "me", "1000", "WAIT"}, "ERR wrong number of arguments"},
		{"release no args", []string{"FENCE.RELEASE"}, "ERR wrong number of arguments for 'fence.release' command"},
		{"status two keys", []string{"FENCE.STATUS", "a", "b"}, "ERR wrong number of arguments"},
		{"ping too many args", []string{"PING", "a", "b"}, "ERR wrong number of arguments for 'ping' command"},
		{"ttl not an integer", []string{"FENCE.ACQUIRE", "a", "me", "ten"}, "ERR invalid argument: ttl: want a whole number of milliseconds, got 'ten'"},
		{"ttl negative", []string{"FENCE.ACQUIRE", "a", "me", "-5"}, "ERR invalid argument: ttl: want a whole number of milliseconds, got '-5'"},
		{"ttl fraction", []string{"FENCE.ACQUIRE", "a", "me", "1.5"}, "ERR invalid argument: ttl: want a whole number of milliseconds, got '1.5'"},
		{"extend ttl not an integer", []string{"FENCE.EXTEND", "a", "me", "x"}, "ERR invalid argument: ttl: want a whole number of milliseconds, got 'x'"},
		{"wait not an integer", []string{"FENCE.ACQUIRE", "a", "me", "1000", "WAIT", "soon"}, "ERR invalid argument: wait: want a whole number of milliseconds, got 'soon'"},
		{"wait misspelt", []string{"FENCE.ACQUIRE", "a", "me", "1000", "WAITS", "5"}, "ERR invalid argument: option: 'WAITS' is not one here: want WAIT ms, SESSION id or VALUE v, each once"},
		{"ttl below minimum", []string{"FENCE.ACQUIRE", "a", "me", "1"}, "ERR invalid argument"},
		{"empty owner", []string{"FENCE.ACQUIRE", "a", "", "1000"}, "ERR invalid argument"},
		{"unknown command", []string{"NOSUCH", "x", "y"}, "ERR unknown command 'NOSUCH', with args beginning with: 'x' 'y'"},
		{"unknown fence command", []string{"FENCE.NOSUCH", "a"}, "ERR unknown command 'FENCE.NOSUCH'"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := rc.do(t, tc.args...)
			e, isErr := got.(respError)
			require.True(t, isErr, "%q answered %#v, want an error", tc.args, got)
			assert.True(t, strings.HasPrefix(string(e), tc.want), "%q answered %q, want %q...", tc.args, e, tc.want)
			assert.Equal(t, "PONG", rc.do(t, "PING"), "the connection still answers PING")
		})
	}

	// Nothing above took the lock, and the connection still runs commands.
	assert.Nil(t, rc.do(t, "FENCE.STATUS", "a"))
	got := rc.do(t, "FENCE.ACQUIRE", "a", "me", "1000")
	require.IsType(t, []any{}, got)
	assert.Equal(t, int64(1000), got.([]any)[1])

	// redis-cli shows the same errors to a person.
	out := cli(t, d, "FENCE.ACQUIRE", "a", "me", "ten")
	assert.Equal(t, "ERR invalid argument: ttl: want a whole number of milliseconds, got 'ten'", out[0])
}
