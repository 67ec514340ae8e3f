package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencerlock/fencer/client"
	"github.com/stretchr/testify/require"
)

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
