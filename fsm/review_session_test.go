package fsm

import (
	"bytes"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A Redis-compatible SET (OpPut of a string) over a lock held under a
// session replaces the lock: the key is no longer held under the session,
// so the session's end must not free it, and a later DEL of the key must
// not leave the session naming a key that is gone (its end would then
// dereference a missing lease). A table restored from a snapshot in between
// must end the session exactly as the original does.
func TestPutOverSessionLockLeavesTheSession(t *testing.T) {
	a := newApplier()
	s := a.apply(t, openSession(5000)).Position
	require.Equal(t, Granted, a.apply(t, sessionAcquire("k", "o", s)).Code)
	require.Equal(t, Written, a.apply(t, putString("k", "redis-value", 0)).Code)

	keys, open := a.t.SessionKeys(s)
	require.True(t, open)
	assert.Empty(t, keys, "k is a plain Redis string now, not held under the session")
	info, _ := a.t.Session(s)
	assert.Zero(t, info.Locks)

	// A replica restored from a snapshot taken now.
	b := &applier{t: New(), index: a.index}
	require.NoError(t, b.t.Restore(io.NopCloser(bytes.NewReader(a.t.MarshalSnapshot()))))

	ra := a.apply(t, Command{Op: OpSessionClose, Session: s})
	rb := b.apply(t, Command{Op: OpSessionClose, Session: s})
	assert.Len(t, ra.Sub, len(rb.Sub), "the replicas disagree on what the session's end frees")
	l, held := a.t.Get("k")
	assert.True(t, held, "the session's end freed a key it no longer held")
	assert.Equal(t, "redis-value", l.Owner)
	assert.Equal(t, a.t.MarshalSnapshot(), b.t.MarshalSnapshot(), "replicas diverged")
}

func TestPutThenDelOfSessionLockThenSessionEnd(t *testing.T) {
	a := newApplier()
	s := a.apply(t, openSession(5000)).Position
	require.Equal(t, Granted, a.apply(t, sessionAcquire("k", "o", s)).Code)
	require.Equal(t, Written, a.apply(t, putString("k", "o", 0)).Code)
	require.Equal(t, Revoked, a.apply(t, Command{Op: OpRevoke, Key: "k"}).Code)
	var r *Result
	require.NotPanics(t, func() { r = a.apply(t, Command{Op: OpSessionExpire, Session: s, Lease: &LeaseRef{Version: s}}) },
		"a session's end must not panic (every replica would, at the same entry)")
	assert.Equal(t, Expired, r.Code)
	assert.Empty(t, r.Sub)
}
