package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/fencerlock/fencer/fsm"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// openNode starts a real single node (raft-wal with fsync, TCP transport on
// loopback) in dir and waits until it is a ready leader.
func openNode(t testing.TB, dir string, mod ...func(*Config)) *Node {
	t.Helper()
	cfg := DefaultConfig()
	cfg.DataDir = dir
	cfg.RaftAddr = "127.0.0.1:0"
	cfg.RaftLogLevel = "error"
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, m := range mod {
		m(&cfg)
	}
	n, err := Open(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, n.waitReady(ctx), "node did not become a ready leader")
	// A new leader records its own client address in a background entry;
	// let it land so that tests start from a quiet log.
	require.Eventually(t, func() bool { return n.table.Members()[n.ID()] == n.cfg.ClientAddr },
		10*time.Second, 5*time.Millisecond, "leader did not record its client address")
	return n
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustAcquire(t *testing.T, n *Node, key, owner string, ttl time.Duration) Grant {
	t.Helper()
	g, ok, err := n.Acquire(ctxT(t), key, owner, ttl, 0)
	require.NoError(t, err)
	require.True(t, ok, "acquire %s by %s not granted", key, owner)
	return g
}

func TestAcquireReleaseTokens(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := ctxT(t)
	g1 := mustAcquire(t, n, "a", "me", 10*time.Second)
	assert.Equal(t, 10*time.Second, g1.TTL)

	again := mustAcquire(t, n, "a", "me", 10*time.Second)
	assert.Equal(t, g1.Token, again.Token, "same owner gets the same token")

	_, ok, err := n.Acquire(ctx, "a", "you", 10*time.Second, 0)
	require.NoError(t, err)
	assert.False(t, ok, "second owner refused while held")

	s, held, err := n.Status(ctx, "a")
	require.NoError(t, err)
	require.True(t, held)
	assert.Equal(t, "me", s.Owner)
	assert.Equal(t, g1.Token, s.Token)
	assert.InDelta(t, 10*time.Second, s.Remaining, float64(time.Second))

	ok, err = n.Check(ctx, "a", g1.Token)
	require.NoError(t, err)
	assert.True(t, ok)

	ok, err = n.Release(ctx, "a", "you")
	require.NoError(t, err)
	assert.False(t, ok, "non-holder cannot release")
	ok, err = n.Release(ctx, "a", "me")
	require.NoError(t, err)
	assert.True(t, ok)
	ok, err = n.Release(ctx, "a", "me")
	require.NoError(t, err)
	assert.True(t, ok, "repeated release reports success")

	_, ok, err = n.Acquire(ctx, "a", "me", 10*time.Second, 0)
	require.NoError(t, err)
	assert.False(t, ok, "a released owner cannot resurrect its lock")
	// you released (gave up) while me held: nothing more is granted to it.
	_, ok, err = n.Acquire(ctx, "a", "you", 10*time.Second, 0)
	require.NoError(t, err)
	assert.False(t, ok, "an owner that gave up the key is not granted it after")

	g2 := mustAcquire(t, n, "a", "them", 10*time.Second)
	assert.Greater(t, g2.Token, g1.Token)
	ok, err = n.Check(ctx, "a", g1.Token)
	require.NoError(t, err)
	assert.False(t, ok, "old token is no longer current")
}

func TestInvalidArguments(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := ctxT(t)
	long := string(make([]byte, 2000))
	cases := []struct {
		name string
		err  error
	}{
		{"empty key", func() error { _, _, err := n.Acquire(ctx, "", "o", time.Second, 0); return err }()},
		{"empty owner", func() error { _, _, err := n.Acquire(ctx, "k", "", time.Second, 0); return err }()},
		{"long key", func() error { _, _, err := n.Acquire(ctx, long, "o", time.Second, 0); return err }()},
		{"ttl too short", func() error { _, _, err := n.Acquire(ctx, "k", "o", time.Millisecond, 0); return err }()},
		{"ttl too long", func() error { _, _, err := n.Acquire(ctx, "k", "o", 25*time.Hour, 0); return err }()},
		{"negative wait", func() error { _, _, err := n.Acquire(ctx, "k", "o", time.Second, -1); return err }()},
		{"extend ttl", func() error { _, err := n.Extend(ctx, "k", "o", 0); return err }()},
	}
	for _, c := range cases {
		assert.ErrorIs(t, c.err, ErrInvalidArgument, c.name)
	}
	_, held, err := n.Status(ctx, "k")
	require.NoError(t, err)
	assert.False(t, held, "nothing was granted by invalid requests")
}

func TestLeaseExpiresAfterTTLAndNotBefore(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := ctxT(t)
	const ttl = 1500 * time.Millisecond
	sent := time.Now()
	g := mustAcquire(t, n, "x", "holder", ttl)

	// Held for the whole TTL counted from when the request was sent.
	for time.Since(sent) < ttl-200*time.Millisecond {
		_, ok, err := n.Acquire(ctx, "x", "other", ttl, 0)
		require.NoError(t, err)
		require.False(t, ok, "granted to another owner %v after the request, before the TTL", time.Since(sent))
		time.Sleep(100 * time.Millisecond)
	}
	// Free within a generous margin after it.
	deadline := sent.Add(2 * ttl)
	for {
		_, held, err := n.Status(ctx, "x")
		require.NoError(t, err)
		if !held {
			break
		}
		require.True(t, time.Now().Before(deadline), "lease not freed by 2x TTL")
		time.Sleep(20 * time.Millisecond)
	}
	assert.GreaterOrEqual(t, time.Since(sent), ttl, "freed before its TTL")
	g2 := mustAcquire(t, n, "x", "other", ttl)
	assert.Greater(t, g2.Token, g.Token)
}

func TestExtendKeepsLeaseAlive(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := ctxT(t)
	const ttl = 600 * time.Millisecond
	g := mustAcquire(t, n, "x", "holder", ttl)
	for i := 0; i < 6; i++ {
		time.Sleep(ttl / 3)
		ok, err := n.Extend(ctx, "x", "holder", ttl)
		require.NoError(t, err)
		require.True(t, ok, "extend %d", i)
	}
	s, held, err := n.Status(ctx, "x")
	require.NoError(t, err)
	require.True(t, held, "renewed lease still held after 2x its TTL")
	assert.Equal(t, g.Token, s.Token)
	ok, err := n.Extend(ctx, "x", "intruder", ttl)
	require.NoError(t, err)
	assert.False(t, ok)
}

func TestWaitersGrantedInArrivalOrder(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := ctxT(t)
	first := mustAcquire(t, n, "q", "holder", 10*time.Second)

	type got struct {
		owner string
		grant Grant
		at    time.Time
	}
	results := make(chan got, 3)
	for i := 1; i <= 3; i++ {
		owner := fmt.Sprintf("w%d", i)
		go func() {
			g, ok, err := n.Acquire(ctx, "q", owner, 10*time.Second, 8*time.Second)
			if err != nil || !ok {
				results <- got{owner: owner + "-failed"}
				return
			}
			results <- got{owner: owner, grant: g, at: time.Now()}
		}()
		// Arrival order: wait until this waiter is queued.
		require.Eventually(t, func() bool {
			n.grants.mu.Lock()
			defer n.grants.mu.Unlock()
			return len(n.grants.waits.byKey["q"]) == i
		}, 5*time.Second, 5*time.Millisecond)
	}

	prev, prevOwner := first.Token, "holder"
	for i := 1; i <= 3; i++ {
		ok, err := n.Release(ctx, "q", prevOwner)
		require.NoError(t, err)
		require.True(t, ok)
		r := <-results
		require.Equal(t, fmt.Sprintf("w%d", i), r.owner, "grant order")
		assert.Greater(t, r.grant.Token, prev)
		// Granted in the commit that freed it: the release entry is the
		// grant's entry, so no other entry came between.
		s, held, err := n.Status(ctx, "q")
		require.NoError(t, err)
		require.True(t, held)
		assert.Equal(t, r.owner, s.Owner)
		prev, prevOwner = r.grant.Token, r.owner
	}
}

func TestWaiterHandedLockOnExpiry(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := ctxT(t)
	const ttl = 800 * time.Millisecond
	sent := time.Now()
	g := mustAcquire(t, n, "e", "sleepy", ttl)
	w, ok, err := n.Acquire(ctx, "e", "waiter", 5*time.Second, 5*time.Second)
	require.NoError(t, err)
	require.True(t, ok)
	assert.GreaterOrEqual(t, time.Since(sent), ttl, "waiter granted before the holder's TTL")
	assert.Less(t, time.Since(sent), 2*ttl+time.Second)
	assert.Greater(t, w.Token, g.Token)
	// The expiry entry itself made the grant: no entry came after it.
	assert.Equal(t, w.Token, n.table.LastIndex(), "the grant came in a later entry than the expiry")
	assert.Equal(t, "waiter", mustStatus(t, n, "e").Owner)
}

func TestWaitEndsWithoutGrant(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := ctxT(t)
	mustAcquire(t, n, "k", "holder", 10*time.Second)
	start := time.Now()
	_, ok, err := n.Acquire(ctx, "k", "waiter", time.Second, 300*time.Millisecond)
	require.NoError(t, err)
	assert.False(t, ok)
	assert.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
	n.grants.mu.Lock()
	assert.Zero(t, n.grants.waits.count(), "the ended wait left the queue")
	n.grants.mu.Unlock()
}

func TestNewerWaitReplacesOlderInPlace(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := ctxT(t)
	mustAcquire(t, n, "k", "holder", 10*time.Second)
	var wg sync.WaitGroup
	outcome := map[string]bool{}
	var mu sync.Mutex
	wait := func(tag, owner string) {
		defer wg.Done()
		_, ok, err := n.Acquire(ctx, "k", owner, 10*time.Second, 8*time.Second)
		require.NoError(t, err)
		mu.Lock()
		outcome[tag] = ok
		mu.Unlock()
	}
	queued := func(c int) {
		require.Eventually(t, func() bool {
			n.grants.mu.Lock()
			defer n.grants.mu.Unlock()
			return len(n.grants.waits.byKey["k"]) == c
		}, 5*time.Second, 5*time.Millisecond)
	}
	wg.Add(3)
	go wait("a-old", "a")
	queued(1)
	go wait("b", "b")
	queued(2)
	go wait("a-new", "a")
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); _, done := outcome["a-old"]; return done }, 5*time.Second, 5*time.Millisecond)
	ok, err := n.Release(ctx, "k", "holder")
	require.NoError(t, err)
	require.True(t, ok)
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); _, done := outcome["a-new"]; return done }, 5*time.Second, 5*time.Millisecond)
	s, _, err := n.Status(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, "a", s.Owner, "the newer wait kept the older one's place, ahead of b")
	_, err = n.Release(ctx, "k", "a")
	require.NoError(t, err)
	wg.Wait()
	assert.Equal(t, map[string]bool{"a-old": false, "a-new": true, "b": true}, outcome)
}

func TestGrantToDepartedWaiterIsRevoked(t *testing.T) {
	n := openNode(t, t.TempDir())
	mustAcquire(t, n, "k", "holder", 10*time.Second)
	wctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, _, err := n.Acquire(wctx, "k", "gone", 10*time.Second, 8*time.Second)
		done <- err
	}()
	require.Eventually(t, func() bool {
		n.grants.mu.Lock()
		defer n.grants.mu.Unlock()
		return n.grants.waits.count() == 1
	}, 5*time.Second, 5*time.Millisecond)

	// Simulate the race a real connection loss can produce on demand only
	// rarely: the release that hands the lock to the waiter is committed
	// after the waiter's caller has gone. The waiter is still queued when the
	// release is proposed, and its context is cancelled before the entry
	// is applied.
	n.grants.mu.Lock()
	w := n.grants.headWaiterLocked("k")
	n.grants.mu.Unlock()
	require.NotNil(t, w)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	// The waiter left the queue; now commit a release that still names it.
	ctx := ctxT(t)
	n.grants.mu.Lock()
	require.Nil(t, n.grants.headWaiterLocked("k"))
	n.grants.mu.Unlock()
	r, err := n.propose(ctx, fsmRelease("k", "holder", w.Owner, w.TTL))
	require.NoError(t, err)
	require.Equal(t, "gone", r.Lease.Owner, "the entry granted the departed waiter")
	require.Eventually(t, func() bool {
		_, held, err := n.Status(ctx, "k")
		return err == nil && !held
	}, 5*time.Second, 10*time.Millisecond, "grant to the departed waiter was not revoked")
	// The revoke is not a release: the same owner may acquire again.
	mustAcquire(t, n, "k", "gone", time.Second)
}

func TestRestartKeepsLocksAndTokensGrow(t *testing.T) {
	dir := t.TempDir()
	n := openNode(t, dir)
	g := mustAcquire(t, n, "keep", "me", time.Hour)
	id := n.ID()
	require.NoError(t, n.Close())

	n2 := openNode(t, dir)
	assert.Equal(t, id, n2.ID(), "node id saved in the data dir")
	ctx := ctxT(t)
	s, held, err := n2.Status(ctx, "keep")
	require.NoError(t, err)
	require.True(t, held, "lock survives restart")
	assert.Equal(t, g.Token, s.Token)
	assert.InDelta(t, time.Hour, s.Remaining, float64(time.Minute), "restarted at its full TTL")
	g2 := mustAcquire(t, n2, "new", "me", time.Second)
	assert.Greater(t, g2.Token, g.Token)
}

func TestSnapshotAndRestartFromIt(t *testing.T) {
	dir := t.TempDir()
	small := func(c *Config) { c.SnapshotThreshold = 16; c.SnapshotInterval = 50 * time.Millisecond }
	n := openNode(t, dir, small)
	var last Grant
	for i := 0; i < 100; i++ {
		last = mustAcquire(t, n, fmt.Sprintf("k%d", i), "o", time.Hour)
	}
	require.NoError(t, n.raft.Snapshot().Error())
	require.NoError(t, n.Close())

	n2 := openNode(t, dir, small)
	ctx := ctxT(t)
	for i := 0; i < 100; i += 17 {
		_, held, err := n2.Status(ctx, fmt.Sprintf("k%d", i))
		require.NoError(t, err)
		assert.True(t, held)
	}
	g := mustAcquire(t, n2, "after", "o", time.Second)
	assert.Greater(t, g.Token, last.Token)
}

func TestNodeIDMismatchIsRefused(t *testing.T) {
	dir := t.TempDir()
	n := openNode(t, dir, func(c *Config) { c.ID = "alpha" })
	require.NoError(t, n.Close())
	cfg := DefaultConfig()
	cfg.DataDir, cfg.RaftAddr, cfg.ID = dir, "127.0.0.1:0", "beta"
	_, err := Open(cfg)
	assert.ErrorContains(t, err, `"beta" differs from "alpha"`)
}

func TestConfigValidate(t *testing.T) {
	c := DefaultConfig()
	require.NoError(t, c.Validate())
	c.MinTTL = 0
	c.RaftAddr = "0.0.0.0:7380"
	c.MaxKeyLen = 0
	c.TrailingLogs = 0
	err := c.Validate()
	require.Error(t, err)
	for _, field := range []string{"MinTTL", "RaftAdvertise", "MaxKeyLen", "TrailingLogs"} {
		assert.ErrorContains(t, err, field)
	}

	// With a transport of its own (tests), only the Raft addresses go
	// unchecked.
	_, c.Transport = raft.NewInmemTransport("")
	err = c.Validate()
	for _, field := range []string{"MinTTL", "MaxKeyLen", "TrailingLogs"} {
		assert.ErrorContains(t, err, field)
	}
	assert.NotContains(t, err.Error(), "RaftAdvertise")
}

func fsmRelease(key, owner, waiter string, waiterTTL uint64) fsm.Command {
	return fsm.Command{Op: fsm.OpRelease, Key: key, Owner: owner, Waiter: &fsm.Waiter{Owner: waiter, TTL: waiterTTL}}
}

func mustStatus(t *testing.T, n *Node, key string) Status {
	t.Helper()
	s, held, err := n.Status(ctxT(t), key)
	require.NoError(t, err)
	require.True(t, held, "%s is not held", key)
	return s
}

func TestTranslateRaftErrors(t *testing.T) {
	n := openNode(t, t.TempDir())
	cases := []struct {
		in   error
		want error
	}{
		{raft.ErrLeadershipLost, ErrUnknownOutcome},
		{raft.ErrRaftShutdown, ErrUnknownOutcome},
		{raft.ErrRaftShutdown, ErrShutdown},
		{raft.ErrNotLeader, ErrNotLeader},
		{raft.ErrEnqueueTimeout, ErrNoLeader},
		{errors.New("disk on fire"), ErrUnknownOutcome},
	}
	for _, c := range cases {
		assert.ErrorIs(t, n.translate(c.in), c.want, "%v", c.in)
	}
	var nl *NotLeaderError
	require.ErrorAs(t, n.translate(raft.ErrNotLeader), &nl)
	assert.Equal(t, n.ID(), nl.Leader, "names the known leader")
}

func TestCancelledContextProposesNothing(t *testing.T) {
	n := openNode(t, t.TempDir())
	before := n.table.LastIndex()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err := n.Acquire(ctx, "k", "o", time.Second, 0)
	require.ErrorIs(t, err, context.Canceled)
	assert.NotErrorIs(t, err, ErrUnknownOutcome, "nothing was proposed, so the outcome is known")
	assert.Equal(t, before, n.table.LastIndex())
}

func TestCloseAnswersWaiters(t *testing.T) {
	n := openNode(t, t.TempDir())
	mustAcquire(t, n, "k", "h", 10*time.Second)
	errc := make(chan error, 1)
	go func() {
		_, _, err := n.Acquire(context.Background(), "k", "w", time.Second, 30*time.Second)
		errc <- err
	}()
	require.Eventually(t, func() bool { n.grants.mu.Lock(); defer n.grants.mu.Unlock(); return n.grants.waits.count() == 1 }, 5*time.Second, 5*time.Millisecond)
	require.NoError(t, n.Close())
	select {
	case err := <-errc:
		assert.ErrorIs(t, err, ErrShutdown)
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not answered on Close")
	}
	_, _, err := n.Acquire(ctxT(t), "k", "w", time.Second, 0)
	assert.ErrorIs(t, err, ErrShutdown)
}

func TestRedisSemantics(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := ctxT(t)
	g, ok, err := n.AcquireRedis(ctx, "r", "v", 5*time.Second)
	require.NoError(t, err)
	require.True(t, ok)
	_, ok, err = n.AcquireRedis(ctx, "r", "v", 5*time.Second)
	require.NoError(t, err)
	assert.False(t, ok, "SET NX with the same value is refused while held")
	releaseRedis := func() bool {
		var ok bool
		require.NoError(t, n.Update(ctx, []string{"r"}, func(tx *Tx) (err error) {
			ok, err = tx.Release("r", "v", true)
			return err
		}))
		return ok
	}
	assert.True(t, releaseRedis())
	assert.False(t, releaseRedis(), "a Redis release is not remembered")
	g2, ok, err := n.AcquireRedis(ctx, "r", "v", 5*time.Second)
	require.NoError(t, err)
	require.True(t, ok, "after a release the same value may take the key again")
	assert.Greater(t, g2.Token, g.Token)

}

// A holder whose lease ran out on the leader does not renew it ahead of the
// waiters: the expiry hands the lock to the first waiter.
func TestExpiredHolderDoesNotJumpTheQueue(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := ctxT(t)
	const ttl = time.Second
	mustAcquire(t, n, "k", "holder", ttl)
	got := make(chan Grant, 1)
	go func() {
		g, ok, err := n.Acquire(ctx, "k", "waiter", 10*time.Second, 8*time.Second)
		if err == nil && ok {
			got <- g
		}
		close(got)
	}()
	require.Eventually(t, func() bool { n.grants.mu.Lock(); defer n.grants.mu.Unlock(); return n.grants.waits.count() == 1 }, 5*time.Second, 5*time.Millisecond)
	// Stop the lessor from acting so the lease is past its deadline with
	// the waiter still queued, then let the holder try to renew.
	n.grants.mu.Lock()
	n.grants.readiness.ready = false
	n.grants.mu.Unlock()
	time.Sleep(ttl + 200*time.Millisecond)
	n.grants.mu.Lock()
	n.grants.readiness.ready = true
	n.grants.mu.Unlock()
	_, ok, err := n.Acquire(ctx, "k", "holder", ttl, 0)
	require.NoError(t, err)
	assert.False(t, ok, "the expired holder must not renew ahead of the waiter")
	n.kick()
	select {
	case g, ok := <-got:
		require.True(t, ok, "waiter not granted")
		assert.Equal(t, "waiter", mustStatus(t, n, "k").Owner)
		assert.Positive(t, g.Token)
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not granted after the expiry")
	}
}

func TestLessorCompactsRenewals(t *testing.T) {
	table := fsm.New()
	ls := newLessor(table)
	now := time.Now()
	for i := uint64(1); i <= 10000; i++ {
		c := fsm.Command{Op: fsm.OpAcquire, Key: "k", Owner: "o", TTL: 1000}
		r := table.Apply(&raft.Log{Index: i, Type: raft.LogCommand, Data: c.Encode(nil)}).(*fsm.Result)
		ls.set("k", r.Lease, now)
	}
	assert.LessOrEqual(t, len(ls.locks.items), 2*table.Len()+1024)
	d, ok := ls.next()
	require.True(t, ok)
	assert.Zero(t, d.Sub(now.Add(time.Second)), "on the monotonic clock")
}
