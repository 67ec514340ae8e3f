package server

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fencerlock/fencer/fsm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A session's locks live as long as its keepalives: past the TTL while kept
// alive, and, once the keepalives stop, freed all in one entry no earlier
// than the TTL after the last keepalive, handed to their waiters there.
func TestSessionHoldsLocksWhileKeptAlive(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := ctxT(t)
	const ttl = 800 * time.Millisecond
	id, err := n.OpenSession(ctx, ttl, "")
	require.NoError(t, err)
	tokens := map[string]uint64{}
	for i := range 20 {
		key := fmt.Sprintf("k%d", i)
		g, ok, err := n.AcquireInSession(ctx, id, key, "me", "", 0)
		require.NoError(t, err)
		require.True(t, ok)
		tokens[key] = g.Token
	}
	// Kept alive for three TTLs.
	for end := time.Now().Add(3 * ttl); time.Now().Before(end); time.Sleep(ttl / 4) {
		_, alive, err := n.KeepAlive(ctx, id)
		require.NoError(t, err)
		require.True(t, alive)
	}
	s, open, err := n.Session(ctx, id)
	require.NoError(t, err)
	require.True(t, open)
	require.Len(t, s.Locks, 20)
	assert.Equal(t, ttl, s.TTL)

	// A waiter for one of them.
	type result struct {
		g   Grant
		ok  bool
		err error
	}
	waited := make(chan result, 1)
	go func() {
		g, ok, err := n.Acquire(ctx, "k3", "next", 5*time.Second, 5*time.Second)
		waited <- result{g, ok, err}
	}()
	require.Eventually(t, func() bool { return n.grants.waiting() == 1 }, 5*time.Second, 5*time.Millisecond)

	last := time.Now()
	_, _, err = n.KeepAlive(ctx, id)
	require.NoError(t, err)
	for time.Since(last) < ttl-100*time.Millisecond {
		st, held := mustStatusOK(t, n, "k0")
		require.True(t, held, "freed %v after the last keepalive, before the TTL", time.Since(last))
		assert.Equal(t, id, st.Session)
		time.Sleep(50 * time.Millisecond)
	}
	w := <-waited
	require.NoError(t, w.err)
	require.True(t, w.ok)
	assert.GreaterOrEqual(t, time.Since(last), ttl, "handed over before the TTL")
	assert.Greater(t, w.g.Token, tokens["k3"])
	for key := range tokens {
		if key == "k3" {
			continue
		}
		_, held := mustStatusOK(t, n, key)
		assert.False(t, held, "%s still held after its session ended", key)
	}
	_, alive, err := n.KeepAlive(ctx, id)
	require.NoError(t, err)
	assert.False(t, alive, "an ended session came back")
	_, _, err = n.AcquireInSession(ctx, id, "other", "me", "", 0)
	assert.ErrorIs(t, err, ErrNoSession)
}

func mustStatusOK(t *testing.T, n *Node, key string) (Status, bool) {
	t.Helper()
	s, held, err := n.Status(ctxT(t), key)
	require.NoError(t, err)
	return s, held
}

// Closing a session releases its locks as releases do (remembered) and
// hands them to waiters; a waiter whose own session ended meanwhile is not
// granted, and hears why.
func TestCloseSessionReleasesAndHandsOver(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := ctxT(t)
	a, err := n.OpenSession(ctx, 5*time.Second, "")
	require.NoError(t, err)
	b, err := n.OpenSession(ctx, 5*time.Second, "")
	require.NoError(t, err)
	c, err := n.OpenSession(ctx, 5*time.Second, "")
	require.NoError(t, err)
	g1, ok, err := n.AcquireInSession(ctx, a, "x", "alice", "", 0)
	require.NoError(t, err)
	require.True(t, ok)
	_, ok, err = n.AcquireInSession(ctx, a, "y", "alice", "", 0)
	require.NoError(t, err)
	require.True(t, ok)

	errs := make(chan error, 2)
	granted := make(chan Grant, 2)
	wait := func(s uint64, key, owner string) {
		g, ok, err := n.AcquireInSession(ctx, s, key, owner, "v", 5*time.Second)
		if err == nil && !ok {
			err = errors.New("not granted")
		}
		if err == nil {
			granted <- g
		}
		errs <- err
	}
	go wait(b, "x", "bob")
	require.Eventually(t, func() bool { return n.grants.waiting() == 1 }, 5*time.Second, 5*time.Millisecond)
	go wait(c, "y", "carol")
	require.Eventually(t, func() bool { return n.grants.waiting() == 2 }, 5*time.Second, 5*time.Millisecond)
	closed, err := n.CloseSession(ctx, c) // carol's session ends while she waits
	require.NoError(t, err)
	require.True(t, closed)

	closed, err = n.CloseSession(ctx, a)
	require.NoError(t, err)
	require.True(t, closed)
	e1, e2 := <-errs, <-errs
	got := []error{e1, e2}
	assert.Contains(t, got, nil, "bob is granted x")
	assert.True(t, errors.Is(e1, ErrNoSession) || errors.Is(e2, ErrNoSession), "carol hears her session ended: %v %v", e1, e2)
	g := <-granted
	assert.Greater(t, g.Token, g1.Token)
	st, held := mustStatusOK(t, n, "x")
	require.True(t, held)
	assert.Equal(t, "bob", st.Owner)
	assert.Equal(t, b, st.Session)
	assert.Equal(t, "v", st.Value)
	_, held = mustStatusOK(t, n, "y")
	assert.False(t, held)

	// The close is remembered: alice's retried release succeeds, her
	// retried acquire is refused; a second close reports the session gone.
	ok, err = n.ReleaseInSession(ctx, a, "y", "alice")
	require.NoError(t, err)
	assert.True(t, ok)
	closed, err = n.CloseSession(ctx, a)
	require.NoError(t, err)
	assert.False(t, closed)
}

func TestSessionLimits(t *testing.T) {
	n := openNode(t, t.TempDir(), func(c *Config) { c.MaxSessionLocks = 2; c.MaxSessions = 2 })
	ctx := ctxT(t)
	id, err := n.OpenSession(ctx, 5*time.Second, "")
	require.NoError(t, err)
	for _, k := range []string{"a", "b"} {
		_, ok, err := n.AcquireInSession(ctx, id, k, "o", "", 0)
		require.NoError(t, err)
		require.True(t, ok)
	}
	_, _, err = n.AcquireInSession(ctx, id, "c", "o", "", 0)
	assert.ErrorIs(t, err, ErrLimit)
	// A repeated acquire of a held one is not a new lock.
	_, ok, err := n.AcquireInSession(ctx, id, "a", "o", "", 0)
	require.NoError(t, err)
	assert.True(t, ok)
	_, err = n.OpenSession(ctx, 5*time.Second, "")
	require.NoError(t, err)
	_, err = n.OpenSession(ctx, 5*time.Second, "")
	assert.ErrorIs(t, err, ErrLimit)
	_, err = n.OpenSession(ctx, time.Millisecond, "")
	assert.ErrorIs(t, err, ErrInvalidArgument)
	_, _, err = n.AcquireInSession(ctx, 12345, "z", "o", "", 0)
	assert.ErrorIs(t, err, ErrNoSession)
}

// A new leader restarts every session at its full TTL: a session kept
// alive through a failover keeps its locks, and one left alone ends no
// earlier than a full TTL after the new leader took over.
func TestSessionSurvivesFailover(t *testing.T) {
	c := newCluster(t, 3)
	old := c.leader()
	ctx := ctxT(t)
	const ttl = 2 * time.Second
	id, err := old.OpenSession(ctx, ttl, "")
	require.NoError(t, err)
	g, ok, err := old.AcquireInSession(ctx, id, "k", "o", "", 0)
	require.NoError(t, err)
	require.True(t, ok)
	i := c.index(old)
	require.NoError(t, old.Close())
	c.nodes[i] = nil
	nl := c.leader()
	took := time.Now()
	st, held := mustStatusOK(t, nl, "k")
	require.True(t, held)
	assert.Equal(t, g.Token, st.Token)
	_, alive, err := nl.KeepAlive(ctx, id)
	require.NoError(t, err)
	require.True(t, alive)
	last := time.Now()
	for time.Since(last) < ttl-200*time.Millisecond {
		_, held := mustStatusOK(t, nl, "k")
		require.True(t, held, "freed before the TTL after failover")
		time.Sleep(100 * time.Millisecond)
	}
	require.Eventually(t, func() bool { _, held := mustStatusOK(t, nl, "k"); return !held }, 2*ttl, 20*time.Millisecond)
	assert.GreaterOrEqual(t, time.Since(took), ttl)
}

// A grant that reached no caller, made under a session, is revoked on the
// holder's behalf: the session's keepalive does not report it as taken,
// as it would a lock taken from its holder.
func TestDepartedSessionWaiterIsNotReportedTaken(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := ctxT(t)
	id, err := n.OpenSession(ctx, 10*time.Second, "")
	require.NoError(t, err)
	mustAcquire(t, n, "k", "holder", 10*time.Second)
	wctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, _, err := n.AcquireInSession(wctx, id, "k", "gone", "", 8*time.Second)
		done <- err
	}()
	require.Eventually(t, func() bool {
		n.grants.mu.Lock()
		defer n.grants.mu.Unlock()
		return n.grants.waits.count() == 1
	}, 5*time.Second, 5*time.Millisecond)
	n.grants.mu.Lock()
	w := n.grants.headWaiterLocked("k")
	n.grants.mu.Unlock()
	require.NotNil(t, w)
	require.Equal(t, id, w.Session)
	// As in TestGrantToDepartedWaiterIsRevoked: the caller goes before
	// the release that hands it the lock commits.
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	r, err := n.propose(ctx, fsm.Command{Op: fsm.OpRelease, Key: "k", Owner: "holder", Waiter: w})
	require.NoError(t, err)
	require.Equal(t, id, r.Lease.Session, "the entry granted the departed waiter under its session")
	require.Eventually(t, func() bool {
		_, held, err := n.Status(ctx, "k")
		return err == nil && !held
	}, 5*time.Second, 10*time.Millisecond, "grant to the departed waiter was not revoked")
	taken, alive, err := n.KeepAlive(ctx, id)
	require.NoError(t, err)
	assert.True(t, alive)
	assert.Zero(t, taken, "a grant its holder never received was not taken from it")

	// A revoke by anyone else still counts.
	_, ok, err := n.AcquireInSession(ctx, id, "k2", "o", "", 0)
	require.NoError(t, err)
	require.True(t, ok)
	_, err = n.propose(ctx, fsm.Command{Op: fsm.OpRevoke, Key: "k2"})
	require.NoError(t, err)
	taken, _, err = n.KeepAlive(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), taken)
}

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
