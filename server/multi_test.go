package server

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAcquireManyAllOrNothing(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := ctxT(t)
	mustAcquire(t, n, "b", "other", 10*time.Second)
	_, ok, err := n.AcquireMany(ctx, MultiAcquire{Keys: []string{"a", "b", "c"}, Owner: "me", TTL: 10 * time.Second})
	require.NoError(t, err)
	assert.False(t, ok)
	_, held, _ := n.Status(ctx, "a")
	assert.False(t, held, "nothing granted")

	// A waiting multi-key acquire keeps "a" and "c" once first there: a later
	// single-key acquire of "a" queues behind it.
	type res struct {
		g   Grant
		ok  bool
		err error
	}
	mch := make(chan res, 1)
	go func() {
		g, ok, err := n.AcquireMany(ctx, MultiAcquire{Keys: []string{"c", "a", "b"}, Owner: "me", TTL: 10 * time.Second, Wait: 10 * time.Second})
		mch <- res{g, ok, err}
	}()
	require.Eventually(t, func() bool { return n.grants.waiting() == 3 }, 5*time.Second, 5*time.Millisecond)
	_, ok, err = n.Acquire(ctx, "a", "late", 10*time.Second, 0)
	require.NoError(t, err)
	assert.False(t, ok, "a later acquire does not pass the multi-key waiter")
	sch := make(chan res, 1)
	go func() {
		g, ok, err := n.Acquire(ctx, "a", "late", 10*time.Second, 10*time.Second)
		sch <- res{g, ok, err}
	}()
	require.Eventually(t, func() bool { return n.grants.waiting() == 4 }, 5*time.Second, 5*time.Millisecond)
	ok, err = n.Release(ctx, "b", "other")
	require.NoError(t, err)
	require.True(t, ok)
	m := <-mch
	require.NoError(t, m.err)
	require.True(t, m.ok)
	for _, k := range []string{"a", "b", "c"} {
		s := mustStatus(t, n, k)
		assert.Equal(t, "me", s.Owner)
		assert.Equal(t, m.g.Token, s.Token, "one token for the set")
	}
	// Retry renews with the same token.
	again, ok, err := n.AcquireMany(ctx, MultiAcquire{Keys: []string{"a", "b", "c"}, Owner: "me", TTL: 10 * time.Second})
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, m.g.Token, again.Token)
	ext, err := n.ExtendMany(ctx, []string{"a", "b", "c"}, "me", 10*time.Second)
	require.NoError(t, err)
	assert.Equal(t, 3, ext)
	rel, err := n.ReleaseMany(ctx, []string{"a", "b", "c"}, "me", 0)
	require.NoError(t, err)
	assert.Equal(t, 3, rel)
	s := <-sch
	require.NoError(t, s.err)
	require.True(t, s.ok, "the single-key waiter got a in the release's entry")
	assert.Greater(t, s.g.Token, m.g.Token)
}

// Two multi-key waits for the same keys in opposite orders, and single-key
// holders freeing them one by one: both are granted, one after the other.
func TestAcquireManyOppositeOrdersDoNotDeadlock(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := ctxT(t)
	mustAcquire(t, n, "x", "h1", 10*time.Second)
	mustAcquire(t, n, "y", "h2", 10*time.Second)
	done := make(chan error, 2)
	for _, o := range []struct {
		owner string
		keys  []string
	}{{"p", []string{"x", "y"}}, {"q", []string{"y", "x"}}} {
		go func() {
			_, ok, err := n.AcquireMany(ctx, MultiAcquire{Keys: o.keys, Owner: o.owner, TTL: 10 * time.Second, Wait: 10 * time.Second})
			if err == nil && ok {
				_, err = n.ReleaseMany(ctx, o.keys, o.owner, 0)
			}
			if err == nil && !ok {
				err = assert.AnError
			}
			done <- err
		}()
	}
	require.Eventually(t, func() bool { return n.grants.waiting() == 4 }, 5*time.Second, 5*time.Millisecond)
	_, err := n.Release(ctx, "y", "h2")
	require.NoError(t, err)
	_, err = n.Release(ctx, "x", "h1")
	require.NoError(t, err)
	for range 2 {
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(5 * time.Second):
			t.Fatal("multi-key waiters deadlocked")
		}
	}
}
