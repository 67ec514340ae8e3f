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

// next takes w's next event, failing the test if none comes within 5s.
func next(t *testing.T, w *Watch) WatchEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ev, err := w.Next(ctx)
	require.NoError(t, err)
	return ev
}

// noEvent asserts that w has nothing to deliver for a while.
func noEvent(t *testing.T, w *Watch) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	ev, err := w.Next(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded, "unexpected event %+v", ev)
}

func watch(t *testing.T, n *Node, key string, from uint64, resume bool) *Watch {
	t.Helper()
	w, err := n.Watch(key, from, resume)
	require.NoError(t, err)
	t.Cleanup(w.Close)
	return w
}

// ev is an event without its position, to compare sequences.
type ev struct {
	Kind  EventKind
	Owner string
	Token uint64
}

func strip(e WatchEvent) ev { return ev{e.Kind, e.Owner, e.Token} }

// Every change of holder is an event, in order, with the position of the
// command that made it: grant, release and the hand-off to a waiter in the
// same command, revoke, expiry. Renewals are not events.
func TestWatchEventsOfEveryChange(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := ctxT(t)
	w := watch(t, n, "k", 0, false)
	first := next(t, w)
	assert.Equal(t, ev{EventReset, "", 0}, strip(first), "the first event without FROM is the current state")
	other := watch(t, n, "other", 0, false)
	next(t, other)

	ga := mustAcquire(t, n, "k", "a", time.Minute)
	got := next(t, w)
	assert.Equal(t, ev{EventGranted, "a", ga.Token}, strip(got))
	assert.Equal(t, ga.Token, got.Position, "a grant's token is its command's position")
	ok, err := n.Extend(ctx, "k", "a", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)

	// b waits; a's release hands k to b in the same command.
	type res struct {
		g   Grant
		err error
	}
	waited := make(chan res, 1)
	go func() {
		g, ok, err := n.Acquire(ctx, "k", "b", time.Minute, 10*time.Second)
		if err == nil && !ok {
			err = errors.New("not granted")
		}
		waited <- res{g, err}
	}()
	require.Eventually(t, func() bool {
		n.grants.mu.Lock()
		defer n.grants.mu.Unlock()
		return n.grants.waits.head("k") != nil
	}, 5*time.Second, 5*time.Millisecond)
	ok, err = n.Release(ctx, "k", "a")
	require.NoError(t, err)
	require.True(t, ok)
	r := <-waited
	require.NoError(t, r.err)
	rel, handed := next(t, w), next(t, w)
	assert.Equal(t, ev{EventReleased, "a", ga.Token}, strip(rel))
	assert.Equal(t, ev{EventGranted, "b", r.g.Token}, strip(handed))
	assert.Equal(t, rel.Position, handed.Position, "release and hand-off are one command")
	assert.Equal(t, r.g.Token, handed.Position)

	ok, err = n.Revoke(ctx, "k")
	require.NoError(t, err)
	require.True(t, ok)
	rev := next(t, w)
	assert.Equal(t, ev{EventRevoked, "b", r.g.Token}, strip(rev))
	assert.Greater(t, rev.Position, handed.Position)

	gc := mustAcquire(t, n, "k", "c", n.cfg.MinTTL)
	assert.Equal(t, ev{EventGranted, "c", gc.Token}, strip(next(t, w)))
	exp := next(t, w)
	assert.Equal(t, ev{EventExpired, "c", gc.Token}, strip(exp))
	assert.Greater(t, exp.Position, gc.Token)
	noEvent(t, w)
	noEvent(t, other)
}

// A watch resumed from a position within the window gets exactly the
// events after it, then the live ones; beyond the window it gets a reset
// with the current state first, and nothing it would have to skip.
func TestWatchResumeWithinAndBeyondWindow(t *testing.T) {
	n := openNode(t, t.TempDir(), func(c *Config) { c.WatchWindow = 6 })
	ctx := ctxT(t)
	all := watch(t, n, "k", 0, false)
	next(t, all)
	var seen []WatchEvent
	for i := 0; i < 4; i++ {
		owner := fmt.Sprint("a", i) // a release is remembered: a new owner each time
		mustAcquire(t, n, "k", owner, time.Minute)
		_, err := n.Release(ctx, "k", owner)
		require.NoError(t, err)
		seen = append(seen, next(t, all), next(t, all))
	}
	// The window keeps the last 6 of the 8 events.
	w := watch(t, n, "k", seen[2].Position, true)
	for _, want := range seen[3:] {
		assert.Equal(t, want, next(t, w))
	}
	noEvent(t, w)

	// Events of other keys take room in the window too.
	mustAcquire(t, n, "x", "a", time.Minute)
	g := mustAcquire(t, n, "k", "z", time.Minute)
	assert.Equal(t, ev{EventGranted, "z", g.Token}, strip(next(t, w)))

	old := watch(t, n, "k", seen[0].Position, true)
	reset := next(t, old)
	assert.Equal(t, ev{EventReset, "z", g.Token}, strip(reset))
	assert.GreaterOrEqual(t, reset.Position, g.Token)
	noEvent(t, old)
	_, err := n.Release(ctx, "k", "z")
	require.NoError(t, err)
	assert.Equal(t, ev{EventReleased, "z", g.Token}, strip(next(t, old)))

	// A client ahead of the node (it saw a later position elsewhere) gets
	// only what comes after it.
	pos := n.table.Position()
	ahead := watch(t, n, "k", pos+2, true)
	mustAcquire(t, n, "k", "p", time.Minute) // pos+1
	g = mustAcquire(t, n, "k2", "q", time.Minute)
	_, err = n.Release(ctx, "k", "p") // pos+3
	require.NoError(t, err)
	got := next(t, ahead)
	assert.Equal(t, EventReleased, got.Kind)
	assert.Equal(t, pos+3, got.Position)
	assert.Equal(t, pos+2, g.Token)
}

// A watcher that does not read while its queue fills up is sent a reset
// with the current state, not a gap, and applying never waited for it.
func TestWatchSlowWatcherGetsReset(t *testing.T) {
	n := openNode(t, t.TempDir())
	n.watches.mu.Lock()
	n.watches.queue = 4
	n.watches.mu.Unlock()
	ctx := ctxT(t)
	w := watch(t, n, "k", 0, false)
	start := next(t, w)
	var last Grant
	for i := 0; i < 5; i++ {
		last = mustAcquire(t, n, "k", fmt.Sprint("a", i), time.Minute)
		if i < 4 {
			_, err := n.Release(ctx, "k", fmt.Sprint("a", i))
			require.NoError(t, err)
		}
	}
	reset := next(t, w)
	assert.Equal(t, ev{EventReset, "a4", last.Token}, strip(reset))
	assert.Greater(t, reset.Position, start.Position)
	noEvent(t, w)
	_, err := n.Release(ctx, "k", "a4")
	require.NoError(t, err)
	rel := next(t, w)
	assert.Equal(t, ev{EventReleased, "a4", last.Token}, strip(rel))
	assert.Greater(t, rel.Position, reset.Position)
}

// A snapshot restored under the watches replaces history: a watch that
// was not given every event up to the snapshot's position gets a reset
// dated there; one that was misses nothing and gets none.
func TestWatchResetAfterRestore(t *testing.T) {
	n := openNode(t, t.TempDir())
	o := watch(t, n, "other", 0, false)
	assert.Equal(t, EventReset, next(t, o).Kind)
	w := watch(t, n, "k", 0, false)
	next(t, w)
	g := mustAcquire(t, n, "k", "a", time.Minute)
	next(t, w)
	n.grants.mu.Lock()
	n.watches.restoredLocked()
	n.grants.mu.Unlock()
	reset := next(t, o)
	assert.Equal(t, ev{EventReset, "", 0}, strip(reset))
	assert.Equal(t, g.Token, reset.Position, "dated at the restore")
	noEvent(t, w)
	resumed := watch(t, n, "k", g.Token-1, true)
	assert.Equal(t, ev{EventReset, "a", g.Token}, strip(next(t, resumed)), "history before the restore is gone")
}

func TestWatchLimitsAndClose(t *testing.T) {
	n := openNode(t, t.TempDir(), func(c *Config) { c.MaxWatches = 2 })
	a := watch(t, n, "k", 0, false)
	watch(t, n, "k", 0, false)
	_, err := n.Watch("k2", 0, false)
	require.ErrorIs(t, err, ErrLimit)
	assert.ErrorContains(t, err, "maximum of 2 watches")
	a.Close()
	a.Close()
	_, err = a.Next(ctxT(t))
	assert.ErrorIs(t, err, ErrShutdown)
	c := watch(t, n, "k2", 0, false)

	_, err = n.Watch("", 0, false)
	var arg *ArgumentError
	require.ErrorAs(t, err, &arg)
	assert.Equal(t, "key", arg.Arg)

	done := make(chan error, 1)
	go func() { next(t, c); _, err := c.Next(context.Background()); done <- err }()
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, n.Close())
	select {
	case err := <-done:
		assert.ErrorIs(t, err, ErrShutdown)
	case <-time.After(5 * time.Second):
		t.Fatal("Next did not end when the node closed")
	}
	_, err = n.Watch("k", 0, false)
	assert.ErrorIs(t, err, ErrShutdown)
}

// Followers serve watches from their own applied log: the same events at
// the same positions as the leader's.
func TestWatchOnFollowerMatchesLeader(t *testing.T) {
	c := newCluster(t, 3)
	leader := c.leader()
	var follower *Node
	for _, n := range c.nodes {
		if n != leader {
			follower = n
			break
		}
	}
	ctx := ctxT(t)
	pos := leader.table.Position()
	require.Eventually(t, func() bool { return follower.table.Position() >= pos }, 5*time.Second, 5*time.Millisecond)
	lw := watch(t, leader, "k", pos, true)
	fw := watch(t, follower, "k", pos, true)
	for i := 0; i < 3; i++ {
		owner := fmt.Sprint("a", i)
		mustAcquire(t, leader, "k", owner, time.Minute)
		_, err := leader.Release(ctx, "k", owner)
		require.NoError(t, err)
	}
	for i := 0; i < 6; i++ {
		le := next(t, lw)
		assert.Equal(t, le, next(t, fw))
	}
}

// eventsOf derives the events of every kind of result.
func TestWatchEventsOfResults(t *testing.T) {
	cmd := &fsm.Command{Key: "k"}
	held := func(owner string, token uint64) fsm.Lease { return fsm.Lease{Owner: owner, Token: token} }
	freed := func(owner string, token uint64) *fsm.Lease { l := held(owner, token); return &l }
	for _, tc := range []struct {
		name string
		r    fsm.Result
		want []ev
	}{
		{"grant", fsm.Result{Code: fsm.Granted, Lease: held("a", 10)}, []ev{{EventGranted, "a", 10}}},
		{"renew", fsm.Result{Code: fsm.Renewed, Lease: held("a", 3)}, nil},
		{"extend", fsm.Result{Code: fsm.Extended, Lease: held("a", 3)}, nil},
		{"held", fsm.Result{Code: fsm.Held, Lease: held("a", 3)}, nil},
		{"expired then granted", fsm.Result{Code: fsm.Granted, Freed: freed("a", 3), Lease: held("b", 10)},
			[]ev{{EventExpired, "a", 3}, {EventGranted, "b", 10}}},
		{"expired then refused", fsm.Result{Code: fsm.Refused, Freed: freed("a", 3)}, []ev{{EventExpired, "a", 3}}},
		{"release and hand-off", fsm.Result{Code: fsm.Released, Freed: freed("a", 3), Waiter: fsm.WaiterGranted, Lease: held("b", 10)},
			[]ev{{EventReleased, "a", 3}, {EventGranted, "b", 10}}},
		{"expiry", fsm.Result{Code: fsm.Expired, Freed: freed("a", 3)}, []ev{{EventExpired, "a", 3}}},
		{"revoke", fsm.Result{Code: fsm.Revoked, Freed: freed("a", 3)}, []ev{{EventRevoked, "a", 3}}},
		{"grant to a waiter", fsm.Result{Code: fsm.Granted, Waiter: fsm.WaiterGranted, Lease: held("b", 10)}, []ev{{EventGranted, "b", 10}}},
		{"put, new value", fsm.Result{Code: fsm.Written, Lease: held("v2", 10)}, []ev{{EventGranted, "v2", 10}}},
		{"put, same value", fsm.Result{Code: fsm.Written, Lease: held("v", 4)}, nil},
		{"put over another kind", fsm.Result{Code: fsm.Written, Freed: freed("", 4), Created: true, Lease: held("v", 10)},
			[]ev{{EventReleased, "", 4}, {EventGranted, "v", 10}}},
		{"put of a list", fsm.Result{Code: fsm.Written, Created: true, Lease: fsm.Lease{Kind: fsm.KindList}}, nil},
		{"delete of a list", fsm.Result{Code: fsm.Revoked, Freed: &fsm.Lease{Kind: fsm.KindList}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.r
			r.Cmd, r.Position = cmd, 10
			var got []ev
			eventsOf(&r, func(e WatchEvent) {
				assert.Equal(t, "k", e.Key)
				assert.Equal(t, uint64(10), e.Position)
				got = append(got, strip(e))
			})
			assert.Equal(t, tc.want, got)
		})
	}
}

// A transaction that writes a key twice with the same value and token
// reports one grant.
func TestWatchOneGrantPerTokenAndOwnerInACommand(t *testing.T) {
	h := newWatchHub(nil, 8, 8, 8)
	w, err := h.watch("k", 0, true)
	require.NoError(t, err)
	g := WatchEvent{Kind: EventGranted, Key: "k", Position: 5, Owner: "v", Token: 5}
	h.publish(g)
	h.publish(g)
	g2 := g
	g2.Owner = "v2"
	h.publish(g2)
	assert.Equal(t, g, next(t, w))
	assert.Equal(t, g2, next(t, w))
	noEvent(t, w)
}

// The retained events are bounded in bytes as well as in number: a large
// value pushes the oldest out, and one larger than the budget is not kept.
func TestWatchWindowBoundedInBytes(t *testing.T) {
	h := newWatchHub(nil, 100, 8, 8)
	h.budget = 3 * eventSize(WatchEvent{Key: "k", Owner: "vv"})
	for pos := uint64(1); pos <= 3; pos++ {
		h.publish(WatchEvent{Kind: EventGranted, Key: "k", Position: pos, Owner: "vv", Token: pos})
	}
	assert.Equal(t, uint64(0), h.since)
	h.publish(WatchEvent{Kind: EventGranted, Key: "k", Position: 4, Owner: "vvvvvvvvvvvvvvv", Token: 4})
	assert.Equal(t, uint64(2), h.since, "two events made room")
	assert.Equal(t, 2, h.n)
	w, err := h.watch("k", 2, true)
	require.NoError(t, err)
	assert.Equal(t, uint64(3), next(t, w).Position)
	assert.Equal(t, uint64(4), next(t, w).Position)
	h.publish(WatchEvent{Kind: EventGranted, Key: "k", Position: 5, Owner: string(make([]byte, h.budget)), Token: 5})
	assert.Equal(t, uint64(5), h.since, "too large to keep: the history up to it is gone")
	assert.Equal(t, 0, h.n)
	assert.Equal(t, uint64(5), next(t, w).Position, "a live watch still gets it")
}

// A session's end gives each of its locks an event at the entry's
// position, with the hand-off to a waiter; a proclaim is an event with the
// new value and the same token; grants and resets carry the value.
func TestWatchSessionsAndElections(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := ctxT(t)
	s, err := n.OpenSession(ctx, 5*time.Second, "")
	require.NoError(t, err)
	g, ok, err := n.AcquireInSession(ctx, s, "e", "alice", "host-a", 0)
	require.NoError(t, err)
	require.True(t, ok)
	w := watch(t, n, "e", 0, false)
	reset := next(t, w)
	assert.Equal(t, WatchEvent{Kind: EventReset, Key: "e", Position: reset.Position, Owner: "alice", Token: g.Token, Value: "host-a"}, reset)
	ok, err = n.Proclaim(ctx, s, "e", "alice", "host-b")
	require.NoError(t, err)
	require.True(t, ok)
	p := next(t, w)
	assert.Equal(t, WatchEvent{Kind: EventProclaimed, Key: "e", Position: p.Position, Owner: "alice", Token: g.Token, Value: "host-b"}, p)

	s2, err := n.OpenSession(ctx, 5*time.Second, "")
	require.NoError(t, err)
	granted := make(chan Grant, 1)
	go func() {
		g, ok, err := n.AcquireInSession(ctx, s2, "e", "bob", "host-c", 5*time.Second)
		if err == nil && ok {
			granted <- g
		}
		close(granted)
	}()
	require.Eventually(t, func() bool { return n.grants.waiting() == 1 }, 5*time.Second, 5*time.Millisecond)
	_, err = n.CloseSession(ctx, s)
	require.NoError(t, err)
	rel, grant := next(t, w), next(t, w)
	assert.Equal(t, ev{EventReleased, "alice", g.Token}, strip(rel))
	assert.Equal(t, WatchEvent{Kind: EventGranted, Key: "e", Position: rel.Position, Owner: "bob", Token: rel.Position, Value: "host-c"}, grant)
	assert.Equal(t, rel.Position, (<-granted).Token)
	_, err = n.RevokeSession(ctx, s2)
	require.NoError(t, err)
	assert.Equal(t, ev{EventRevoked, "bob", rel.Position}, strip(next(t, w)))
}

// A watch resumed FROM a position this node has not reached waits for it:
// even a reset it must be sent (its reader fell behind) is never dated
// below the FROM, which would take the reader's state back.
func TestWatchResetNeverDatedBelowFrom(t *testing.T) {
	n := openNode(t, t.TempDir())
	from := n.table.Position() + 3
	w := watch(t, n, "k", from, true)
	n.watches.mu.Lock()
	w.overflow()
	n.watches.mu.Unlock()
	noEvent(t, w)
	for i := 0; i < 3; i++ {
		mustAcquire(t, n, fmt.Sprint("x", i), "a", time.Minute)
	}
	reset := next(t, w)
	assert.Equal(t, EventReset, reset.Kind)
	assert.GreaterOrEqual(t, reset.Position, from)
	g := mustAcquire(t, n, "k", "b", time.Minute)
	assert.Equal(t, WatchEvent{Kind: EventGranted, Key: "k", Position: g.Token, Owner: "b", Token: g.Token}, next(t, w))
}
