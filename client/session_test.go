package client_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fencerlock/fencer/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSessionKeepsLocksAndCloseReleasesThem(t *testing.T) {
	c := newClient(t)
	ctx := ctxT(t, 30*time.Second)
	s, err := c.NewSession(ctx, client.WithSessionTTL(time.Second))
	require.NoError(t, err)
	var leases []*client.Lease
	for i := range 5 {
		l, err := c.Acquire(ctx, fmt.Sprintf("sess-%d", i), client.WithSession(s))
		require.NoError(t, err)
		assert.Equal(t, s.Until(), l.Until())
		leases = append(leases, l)
	}
	// Held for three TTLs on the session's keepalives alone.
	time.Sleep(3 * time.Second)
	require.NoError(t, s.Err())
	for _, l := range leases {
		require.NoError(t, l.Err())
		st, held, err := c.Status(ctx, l.Name())
		require.NoError(t, err)
		require.True(t, held)
		assert.Equal(t, l.Token(), st.Token)
	}
	// Releasing one leaves the rest.
	require.NoError(t, leases[0].Release(ctx))
	_, held, err := c.Status(ctx, leases[0].Name())
	require.NoError(t, err)
	assert.False(t, held)

	// A waiter is handed a lock when the session closes.
	other := newClient(t)
	got := make(chan *client.Lease, 1)
	go func() {
		l, err := other.Acquire(ctx, leases[1].Name(), client.WithTTL(5*time.Second))
		if err == nil {
			got <- l
		}
		close(got)
	}()
	time.Sleep(300 * time.Millisecond)
	require.NoError(t, s.Close(ctx))
	assert.ErrorIs(t, s.Err(), client.ErrReleased)
	for _, l := range leases[1:] {
		<-l.Done()
	}
	next, ok := <-got
	require.True(t, ok, "the waiter was not granted")
	assert.Greater(t, next.Token(), leases[1].Token())
	require.NoError(t, next.Release(ctx))
	for _, l := range leases[2:] {
		_, held, err := c.Status(ctx, l.Name())
		require.NoError(t, err)
		assert.False(t, held, "%s still held after Close", l.Name())
	}
	_, err = c.Acquire(ctx, "after-close", client.WithSession(s))
	assert.ErrorIs(t, err, client.ErrReleased)
}

// A session the server ends (revoked here) ends every lease held under it,
// on its next keepalive.
func TestSessionLostEndsItsLeases(t *testing.T) {
	c := newClient(t)
	ctx := ctxT(t, 30*time.Second)
	s, err := c.NewSession(ctx, client.WithSessionTTL(900*time.Millisecond))
	require.NoError(t, err)
	l, err := c.Acquire(ctx, "sess-lost", client.WithSession(s))
	require.NoError(t, err)
	_, err = rawClient(t).Do(ctx, "FENCE.SESSION", "REVOKE", s.ID()).Result()
	require.NoError(t, err)
	select {
	case <-l.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("the lease did not end within the session's TTL after a revoke")
	}
	assert.ErrorIs(t, l.Err(), client.ErrSessionEnded)
	assert.ErrorIs(t, l.Err(), client.ErrLeaseLost)
	_, err = c.Acquire(ctx, "sess-lost-2", client.WithSession(s))
	assert.ErrorIs(t, err, client.ErrLeaseLost)
}

func TestElectionCampaignInArrivalOrder(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	type cand struct {
		c *client.Client
		s *client.Session
		e *client.Election
	}
	var cands []cand
	for range 3 {
		c := newClient(t)
		s, err := c.NewSession(ctx, client.WithSessionTTL(2*time.Second))
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close(context.Background()) })
		cands = append(cands, cand{c, s, c.NewElection(s, "elect-order")})
	}
	epoch0, err := cands[0].e.Campaign(ctx, "zero")
	require.NoError(t, err)
	ld, err := cands[1].e.Leader(ctx)
	require.NoError(t, err)
	assert.Equal(t, client.Leader{Value: "zero", Epoch: epoch0, Owner: ld.Owner, Session: cands[0].s.ID()}, ld)

	elected := make(chan int, 2)
	epochs := make([]uint64, 3)
	for _, i := range []int{1, 2} {
		go func() {
			ep, err := cands[i].e.Campaign(ctx, fmt.Sprint(i))
			if err == nil {
				epochs[i] = ep
				elected <- i
			}
		}()
		time.Sleep(300 * time.Millisecond) // 1 queues before 2
	}
	require.NoError(t, cands[0].e.Proclaim(ctx, "zero-bis"))
	ld, err = cands[2].e.Leader(ctx)
	require.NoError(t, err)
	assert.Equal(t, "zero-bis", ld.Value)
	assert.Equal(t, epoch0, ld.Epoch, "a proclaim keeps the epoch")

	done := cands[0].e.Done()
	require.NoError(t, cands[0].e.Resign(ctx))
	<-done
	assert.ErrorIs(t, cands[0].e.Proclaim(ctx, "x"), client.ErrNotElected)
	first := <-elected
	assert.Equal(t, 1, first, "the first to queue is elected first")
	assert.Greater(t, epochs[1], epoch0)

	// The leader's session is lost (revoked): the next is elected with a
	// higher epoch, and the old leader's Done closes.
	done = cands[1].e.Done()
	_, err = rawClient(t).Do(ctx, "FENCE.SESSION", "REVOKE", cands[1].s.ID()).Result()
	require.NoError(t, err)
	assert.Equal(t, 2, <-elected)
	assert.Greater(t, epochs[2], epochs[1])
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		t.Fatal("the deposed leader's Done did not close within the session TTL")
	}
	ld, err = cands[0].e.Leader(ctx)
	require.NoError(t, err)
	assert.Equal(t, "2", ld.Value)
	require.NoError(t, cands[2].e.Resign(ctx))
	_, err = cands[0].e.Leader(ctx)
	assert.True(t, errors.Is(err, client.ErrNotElected), "%v", err)
}

func TestMutexUnderSession(t *testing.T) {
	c := newClient(t)
	ctx := ctxT(t, 30*time.Second)
	s, err := c.NewSession(ctx, client.WithSessionTTL(time.Second))
	require.NoError(t, err)
	defer s.Close(ctx)
	m := c.NewMutex("sess-mutex", client.WithMutexSession(s))
	require.NoError(t, m.LockContext(ctx))
	assert.Equal(t, s.Until(), m.Until())
	st, held, err := c.Status(ctx, "sess-mutex")
	require.NoError(t, err)
	require.True(t, held)
	assert.Equal(t, m.Token(), st.Token)
	ok, err := m.ExtendContext(ctx)
	require.NoError(t, err)
	assert.True(t, ok)
	other := c.NewMutex("sess-mutex")
	assert.ErrorIs(t, other.TryLockContext(ctx), client.ErrLocked)
	ok, err = m.UnlockContext(ctx)
	require.NoError(t, err)
	assert.True(t, ok)
	_, held, err = c.Status(ctx, "sess-mutex")
	require.NoError(t, err)
	assert.False(t, held)
}

func TestElectionObserveSeesEveryLeader(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	c := newClient(t)
	s1, err := c.NewSession(ctx, client.WithSessionTTL(2*time.Second))
	require.NoError(t, err)
	s2, err := c.NewSession(ctx, client.WithSessionTTL(2*time.Second))
	require.NoError(t, err)
	defer s2.Close(ctx)
	e1, e2 := c.NewElection(s1, "elect-observe"), c.NewElection(s2, "elect-observe")
	obs, err := c.NewElection(s2, "elect-observe").Observe(ctx)
	require.NoError(t, err)

	ep1, err := e1.Campaign(ctx, "one")
	require.NoError(t, err)
	first := <-obs
	assert.Equal(t, "one", first.Value)
	assert.Equal(t, ep1, first.Epoch)
	require.NoError(t, e1.Proclaim(ctx, "one-bis"))
	ld := <-obs
	assert.Equal(t, "one-bis", ld.Value)
	assert.Equal(t, ep1, ld.Epoch)
	elected := make(chan uint64, 1)
	go func() {
		ep, err := e2.Campaign(ctx, "two")
		if err == nil {
			elected <- ep
		}
	}()
	time.Sleep(200 * time.Millisecond)
	require.NoError(t, s1.Close(ctx))
	ep2 := <-elected
	ld = <-obs
	assert.Equal(t, "two", ld.Value)
	assert.Equal(t, ep2, ld.Epoch)
	assert.Greater(t, ep2, ep1)
}

// A lock revoked from under a live session ends its lease at the next
// keepalive (the keepalive reports locks taken from the session), and the
// others stay.
func TestSessionLeaseRevokedAloneEnds(t *testing.T) {
	c := newClient(t)
	ctx := ctxT(t, 30*time.Second)
	s, err := c.NewSession(ctx, client.WithSessionTTL(900*time.Millisecond))
	require.NoError(t, err)
	defer s.Close(ctx)
	kept, err := c.Acquire(ctx, "sess-taken-kept", client.WithSession(s))
	require.NoError(t, err)
	taken, err := c.Acquire(ctx, "sess-taken", client.WithSession(s))
	require.NoError(t, err)
	revoke(t, "sess-taken")
	select {
	case <-taken.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("a lease revoked under its session did not end within the session's TTL")
	}
	assert.ErrorIs(t, taken.Err(), client.ErrLeaseLost)
	require.NoError(t, s.KeepAlive(ctx))
	assert.NoError(t, kept.Err())
	assert.NoError(t, s.Err())
}

// The usual loop, `epoch := Campaign(); go lead(epoch); <-e.Done()`, must
// not hang when leadership is lost between Campaign returning and the call
// to Done: Done must then be closed, not a nil channel that never fires.
func TestElectionDoneAfterLeadershipAlreadyLost(t *testing.T) {
	c := newClient(t)
	ctx := ctxT(t, 30*time.Second)
	s, err := c.NewSession(ctx, client.WithSessionTTL(2*time.Second))
	require.NoError(t, err)
	e := c.NewElection(s, "review-done-after-loss")
	_, err = e.Campaign(ctx, "me")
	require.NoError(t, err)

	// Leadership is lost (the session is revoked) before the leader looks
	// at Done.
	_, err = rawClient(t).Do(ctx, "FENCE.SESSION", "REVOKE", s.ID()).Result()
	require.NoError(t, err)
	select {
	case <-s.Done():
	case <-time.After(4 * time.Second):
		t.Fatal("the session did not end after its revoke")
	}

	select {
	case <-e.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("Election.Done() after leadership was lost never fires (it returned a nil channel)")
	}
	require.NotNil(t, e.Context(), "Election.Context() after leadership was lost is nil: ctx.Done() on it panics")
}

// A lock held under a session that the server frees on its own (an
// administrator's FENCE.REVOKE) is handed on at once. Its holder must learn
// it as a lease with a TTL of its own does, at the latest on its next
// Extend; under a session Extend only keeps the session alive and reports
// success for a lock the holder no longer has.
func TestSessionLeaseExtendAfterRevokeReportsLoss(t *testing.T) {
	c := newClient(t)
	ctx := ctxT(t, 30*time.Second)
	s, err := c.NewSession(ctx, client.WithSessionTTL(2*time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	l, err := c.Acquire(ctx, "review-revoked-under-session", client.WithSession(s))
	require.NoError(t, err)
	_, err = rawClient(t).Do(ctx, "FENCE.REVOKE", l.Name()).Result()
	require.NoError(t, err)
	err = l.Extend(ctx)
	require.ErrorIs(t, err, client.ErrLeaseLost, "Extend of a revoked lock under a session reported success")
}
