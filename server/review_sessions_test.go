package server

import (
	"testing"

	"github.com/fencerlock/fencer/fsm"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A wait under a session that ends gets NOSESSION (docs/protocol.md,
// Errors): it can never be granted, so it must not stay queued until the
// key it waits for happens to be freed or its wait runs out.
func TestWaitUnderSessionEndsWithTheSession(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := ctxT(t)
	_, ok, err := n.Acquire(ctx, "busy", "holder", 30*time.Second, 0)
	require.NoError(t, err)
	require.True(t, ok)
	id, err := n.OpenSession(ctx, 5*time.Second, "")
	require.NoError(t, err)

	type result struct {
		ok  bool
		err error
	}
	waited := make(chan result, 1)
	go func() {
		_, ok, err := n.AcquireInSession(ctx, id, "busy", "w", "", 20*time.Second)
		waited <- result{ok, err}
	}()
	require.Eventually(t, func() bool { return n.grants.waiting() == 1 }, 5*time.Second, 5*time.Millisecond)

	closed, err := n.CloseSession(ctx, id)
	require.NoError(t, err)
	require.True(t, closed)
	select {
	case r := <-waited:
		assert.False(t, r.ok)
		assert.ErrorIs(t, r.err, ErrNoSession)
	case <-time.After(2 * time.Second):
		t.Fatal("a wait under a closed session is still queued 2s after the close")
	}
	assert.Zero(t, n.grants.waiting())
}

// The wait queue keeps one waiter per (key, owner), whatever its session:
// a wait by the same owner under another session takes the first one's
// place while a hand-off to the first is in flight. The hand-off then
// grants the key under the first session, and its answer must not tell the
// second caller it holds the key under its own session.
func TestHandOffAnswersOnlyTheSessionItGrants(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := ctxT(t)
	s1, err := n.OpenSession(ctx, 10*time.Second, "")
	require.NoError(t, err)
	s2, err := n.OpenSession(ctx, 10*time.Second, "")
	require.NoError(t, err)
	_, ok, err := n.Acquire(ctx, "k", "holder", 30*time.Second, 0)
	require.NoError(t, err)
	require.True(t, ok)

	first := make(chan error, 1)
	go func() {
		_, _, err := n.AcquireInSession(ctx, s1, "k", "same", "", 10*time.Second)
		first <- err
	}()
	require.Eventually(t, func() bool { return n.grants.waiting() == 1 }, 5*time.Second, 5*time.Millisecond)
	type result struct {
		g   Grant
		ok  bool
		err error
	}
	second := make(chan result, 1)
	// The release naming the s1 waiter is proposed; the s2 wait replaces
	// it in the queue before the entry applies.
	c := fsm.Command{Op: fsm.OpRelease, Key: "k", Owner: "holder", Waiter: n.grants.headWaiter("k")}
	require.Equal(t, s1, c.Waiter.Session)
	go func() {
		g, ok, err := n.AcquireInSession(ctx, s2, "k", "same", "", 2*time.Second)
		second <- result{g, ok, err}
	}()
	require.Eventually(t, func() bool {
		var sess uint64
		n.grants.locked(func() {
			if w := n.grants.waits.head("k"); w != nil {
				sess = w.session
			}
		})
		return sess == s2
	}, 5*time.Second, 5*time.Millisecond)
	<-first // answered "not granted" when replaced
	_, err = n.propose(ctx, c)
	require.NoError(t, err)

	r := <-second
	// The grant under s1 reached no caller: it is revoked once the owner's
	// acquires end, and the s2 caller must not have been told it holds k.
	if r.ok {
		st, held := mustStatusOK(t, n, "k")
		require.True(t, held)
		assert.Equal(t, s2, st.Session, "the caller under s2 was told it holds k, but k is held under s1")
	}
}
