package integration

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// longTTL outlives any test: a lock taken with it is still held after a
// restart unless the restart lost it.
const longTTL = 10 * time.Minute

// TestKill9KeepsLocksAndTokens kills fencerd with SIGKILL and restarts it on
// the same data directory: acknowledged grants and releases survive, and
// tokens keep growing.
func TestKill9KeepsLocksAndTokens(t *testing.T) {
	d := startFencerd(t)
	c := newClient(t, d)

	held, ok := acquire(t, c, "held", "me", longTTL, 0)
	require.True(t, ok)
	maxToken := held.token
	for _, key := range []string{"k1", "k2", "k3"} {
		g, ok := acquire(t, c, key, "other", longTTL, 0)
		require.True(t, ok)
		require.Greater(t, g.token, maxToken)
		maxToken = g.token
	}
	require.Equal(t, int64(1), release(t, c, "k1", "other"))

	d.kill9(t)
	d.restart(t)
	c = newClient(t, d) // the old client's connections died with the process

	s, isHeld := status(t, c, "held")
	require.True(t, isHeld, "a lock granted before the kill is still held")
	assert.Equal(t, "me", s.owner)
	assert.Equal(t, held.token, s.token, "same grant, same token")
	assert.Positive(t, s.remainingMS)
	assert.LessOrEqual(t, s.remainingMS, longTTL.Milliseconds())

	_, ok = acquire(t, c, "held", "you", time.Minute, 0)
	assert.False(t, ok, "another owner is refused after the restart")
	again, ok := acquire(t, c, "held", "me", longTTL, 0)
	require.True(t, ok, "the holder's repeated acquire is a renewal")
	assert.Equal(t, held.token, again.token, "a renewal keeps the token")

	s, isHeld = status(t, c, "k2")
	require.True(t, isHeld)
	assert.Equal(t, "other", s.owner)
	_, isHeld = status(t, c, "k1")
	assert.False(t, isHeld, "a release acknowledged before the kill is kept")
	assert.Equal(t, int64(1), release(t, c, "k1", "other"), "the release is remembered: a repeat reports success")

	fresh, ok := acquire(t, c, "fresh", "me", time.Minute, 0)
	require.True(t, ok)
	assert.Greater(t, fresh.token, maxToken, "a token after the restart exceeds every token granted before")
}

// TestSIGTERMStopsGracefullyAndKeepsLocks stops fencerd with SIGTERM: it
// exits 0 promptly, and a restart on the same data directory keeps its locks.
func TestSIGTERMStopsGracefullyAndKeepsLocks(t *testing.T) {
	d := startFencerd(t)
	c := newClient(t, d)
	g, ok := acquire(t, c, "k", "me", longTTL, 0)
	require.True(t, ok)

	// A client queued for the lock when the signal comes is answered, not
	// left hanging and not granted.
	type answer struct {
		granted bool
		err     error
	}
	waiterDone := make(chan answer, 1)
	wc := newClient(t, d)
	go func() {
		_, granted, err := tryAcquire(wc, "k", "waiter", time.Minute, 30*time.Second)
		waiterDone <- answer{granted, err}
	}()
	time.Sleep(500 * time.Millisecond) // queued: one commit, well within this

	code, took := d.terminate(t)
	assert.Equal(t, 0, code, "exit code after SIGTERM")
	t.Logf("exited %v after SIGTERM", took)
	assert.Contains(t, d.log(t), "msg=stopped", "fencerd logs its orderly stop")
	select {
	case a := <-waiterDone:
		assert.False(t, a.granted, "the waiter is not granted by a stopping server")
		assert.Error(t, a.err, "the waiter gets an error (SHUTDOWN or a closed connection), not a nil 'not granted'")
		t.Logf("the waiter was answered: %v", a.err)
	case <-time.After(stopTimeout):
		t.Fatal("the waiter was not answered when fencerd stopped")
	}

	d.restart(t)
	c = newClient(t, d)
	s, held := status(t, c, "k")
	require.True(t, held, "the lock survives a graceful restart")
	assert.Equal(t, "me", s.owner)
	assert.Equal(t, g.token, s.token)

	next, ok := acquire(t, c, "other", "me", time.Minute, 0)
	require.True(t, ok)
	assert.Greater(t, next.token, g.token)
}
