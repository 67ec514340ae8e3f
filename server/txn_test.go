package server

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencerlock/fencer/fsm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A transaction of several commands takes one entry: its grants share the
// entry's token.
func TestUpdateIsOneEntry(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := ctxT(t)
	mustAcquire(t, n, "c", "other", time.Minute)
	before := n.table.LastIndex()
	var took, refused bool
	require.NoError(t, n.Update(ctx, []string{"a", "b", "c"}, func(tx *Tx) error {
		ok1, err := tx.Acquire("a", "me", time.Minute, true)
		if err != nil {
			return err
		}
		ok2, err := tx.Acquire("b", "me", time.Minute, true)
		if err != nil {
			return err
		}
		ok3, err := tx.Acquire("c", "me", time.Minute, true)
		took, refused = ok1 && ok2, !ok3
		return err
	}))
	assert.True(t, took)
	assert.True(t, refused)
	assert.Equal(t, before+1, n.table.LastIndex(), "one entry")
	a, b := mustStatus(t, n, "a"), mustStatus(t, n, "b")
	assert.Equal(t, a.Token, b.Token, "one entry's grants share its token")
	assert.Equal(t, n.table.LastIndex(), a.Token)
	assert.Equal(t, "other", mustStatus(t, n, "c").Owner)
}

// Reads see the transaction's own writes; a transaction that writes nothing
// proposes nothing.
func TestUpdateReadsItsWritesAndReadOnlyWritesNothing(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := ctxT(t)
	mustAcquire(t, n, "k", "h", time.Minute)
	before := n.table.LastIndex()
	require.NoError(t, n.Update(ctx, []string{"k"}, func(tx *Tx) error {
		s, held, err := tx.Status("k")
		require.NoError(t, err)
		require.True(t, held)
		assert.Equal(t, "h", s.Owner)
		return nil
	}))
	assert.Equal(t, before, n.table.LastIndex(), "a read-only transaction writes no entry")

	require.NoError(t, n.Update(ctx, []string{"k"}, func(tx *Tx) error {
		ok, err := tx.Release("k", "h", true)
		require.NoError(t, err)
		require.True(t, ok)
		_, held, _ := tx.Status("k")
		assert.False(t, held, "the transaction sees its release")
		ok, err = tx.Acquire("k", "n", 2*time.Minute, true)
		require.NoError(t, err)
		require.True(t, ok)
		s, held, _ := tx.Status("k")
		assert.True(t, held)
		assert.Equal(t, "n", s.Owner)
		assert.Equal(t, 2*time.Minute, s.Remaining)
		return nil
	}))
	assert.Equal(t, "n", mustStatus(t, n, "k").Owner)
}

// A write to a key the transaction read, between its reads and its entry,
// makes it work the request out again; the result is as if it ran alone
// after that write.
func TestUpdateWorksAgainAfterAConflict(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := ctxT(t)
	mustAcquire(t, n, "k", "h", time.Minute)
	runs := 0
	var released bool
	require.NoError(t, n.Update(ctx, []string{"k"}, func(tx *Tx) error {
		runs++
		var err error
		released, err = tx.Release("k", "h", true)
		if runs == 1 {
			// Another request takes the lock over meanwhile.
			ok, err := n.Revoke(ctx, "k")
			require.NoError(t, err)
			require.True(t, ok)
			mustAcquire(t, n, "k", "thief", time.Minute)
		}
		return err
	}))
	assert.Equal(t, 2, runs)
	assert.False(t, released, "on the second run h no longer holds k")
	assert.Equal(t, "thief", mustStatus(t, n, "k").Owner, "the first run's release never took effect")
}

func TestUpdateGivesUpWithNothingDone(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := ctxT(t)
	var runs atomic.Int32
	err := n.Update(ctx, []string{"k"}, func(tx *Tx) error {
		runs.Add(1)
		_, _, _ = tx.Status("m")
		if _, err := tx.Acquire("k", "me", time.Minute, true); err != nil {
			return err
		}
		// Every run, someone else takes over a key it read.
		if _, err := n.Revoke(ctx, "m"); err != nil {
			return err
		}
		_, _, err := n.Acquire(ctx, "m", fmt.Sprint("o", runs.Load()), time.Minute, 0)
		return err
	})
	require.ErrorIs(t, err, ErrConflict)
	assert.EqualValues(t, maxTxnAttempts, runs.Load())
	_, held, err := n.Status(ctx, "k")
	require.NoError(t, err)
	assert.False(t, held, "nothing of a transaction that gave up took effect")
}

// A lease that ran out on the leader reads as free, and the transaction's
// entry ends it; a key it frees goes to the first waiter in the same entry.
func TestUpdateExpiresRunOutLeasesAndHandsToWaiters(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := ctxT(t)
	mustAcquire(t, n, "short", "h", 200*time.Millisecond)
	time.Sleep(400 * time.Millisecond) // run out; the expiry loop may or may not have ended it
	mustAcquire(t, n, "q", "h", time.Minute)
	granted := make(chan Grant, 1)
	go func() {
		g, ok, err := n.Acquire(ctx, "q", "w", time.Minute, 5*time.Second)
		if err == nil && ok {
			granted <- g
		}
		close(granted)
	}()
	require.Eventually(t, func() bool {
		n.grants.mu.Lock()
		defer n.grants.mu.Unlock()
		return n.grants.waits.head("q") != nil
	}, 5*time.Second, 5*time.Millisecond)

	require.NoError(t, n.Update(ctx, []string{"short", "q"}, func(tx *Tx) error {
		_, held, err := tx.Status("short")
		require.NoError(t, err)
		assert.False(t, held, "a run-out lease reads as free")
		ok, err := tx.Acquire("short", "new", time.Minute, true)
		require.NoError(t, err)
		assert.True(t, ok)
		ok, err = tx.Revoke("q")
		require.NoError(t, err)
		assert.True(t, ok)
		return nil
	}))
	g, ok := <-granted
	require.True(t, ok, "the waiter was granted")
	assert.Equal(t, n.table.LastIndex(), g.Token, "in the transaction's own entry")
	assert.Equal(t, g.Token, mustStatus(t, n, "short").Token)
	assert.Equal(t, "w", mustStatus(t, n, "q").Owner)
}

func TestUpdateValidatesAndRefusesRegrants(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := ctxT(t)
	err := n.Update(ctx, []string{"k"}, func(tx *Tx) error {
		_, err := tx.Acquire("k", "", time.Minute, true)
		return err
	})
	require.ErrorIs(t, err, ErrInvalidArgument)
	err = n.Update(ctx, []string{"k"}, func(tx *Tx) error {
		if _, err := tx.Acquire("k", "a", time.Minute, true); err != nil {
			return err
		}
		if _, err := tx.Release("k", "a", true); err != nil {
			return err
		}
		_, err := tx.Acquire("k", "b", time.Minute, true)
		return err
	})
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, held, err := n.Status(ctx, "k")
	require.NoError(t, err)
	assert.False(t, held, "nothing was proposed")
}

func TestLatchesSerializeTheSameKeys(t *testing.T) {
	ls := newLatches()
	ctx := context.Background()
	var first held
	require.NoError(t, ls.lock(ctx, []string{"b", "a"}, &first))
	var other held
	require.NoError(t, ls.lock(ctx, []string{"c"}, &other), "other keys are not held up")
	ls.unlock(&other)

	got := make(chan struct{})
	go func() {
		var h held
		if ls.lock(ctx, []string{"a", "z"}, &h) == nil {
			ls.unlock(&h)
		}
		close(got)
	}()
	select {
	case <-got:
		t.Fatal("a second transaction on key a did not wait")
	case <-time.After(100 * time.Millisecond):
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	var late held
	require.ErrorIs(t, ls.lock(short, []string{"z", "a"}, &late), context.DeadlineExceeded)
	ls.unlock(&first)
	<-got
	ls.mu.Lock()
	assert.Empty(t, ls.m, "no latch is left behind")
	assert.NotEmpty(t, ls.free, "given-back latches are kept for reuse")
	ls.mu.Unlock()

	// Reused latches are free: a transaction takes them at once.
	quick, cancel2 := context.WithTimeout(ctx, time.Second)
	defer cancel2()
	var again held
	require.NoError(t, ls.lock(quick, []string{"a", "b", "c", "z"}, &again))
	ls.unlock(&again)
}

// A transaction that would not decode (its commands carry a session part)
// is refused before it reaches the log, where it would stop Apply on every
// node; the node goes on serving.
func TestUndecodableTxnIsNeverProposed(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := ctxT(t)
	s, err := n.OpenSession(ctx, 10*time.Second, "")
	require.NoError(t, err)
	before := n.table.LastIndex()
	c := fsm.Command{Op: fsm.OpTxn, Txn: &fsm.Txn{Cmds: []fsm.Command{{Op: fsm.OpAcquire, Key: "a", Owner: "o", Session: s}}}}
	_, err = n.propose(ctx, c)
	require.ErrorIs(t, err, ErrInvalidArgument)
	assert.Equal(t, before, n.table.LastIndex(), "no entry")
	mustAcquire(t, n, "a", "o", 10*time.Second)
}

// A transaction that writes nothing answers what the table held at one
// moment: here one entry grants a and b between its read of a and its read
// of b, and it must not answer "a free, b held", a state no position held.
// (Native commands take no latches, so reading under them cannot help.)
func TestReadOnlyUpdateReadsOneMoment(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := ctxT(t)
	attempts := 0
	var a, b bool
	require.NoError(t, n.Update(ctx, nil, func(tx *Tx) error {
		attempts++
		var err error
		if _, a, err = tx.Status("a"); err != nil {
			return err
		}
		if attempts == 1 {
			_, granted, err := n.AcquireMany(ctx, MultiAcquire{Keys: []string{"a", "b"}, Owner: "w", TTL: time.Minute})
			require.NoError(t, err)
			require.True(t, granted)
		}
		_, b, err = tx.Status("b")
		return err
	}))
	assert.Equal(t, a, b, "a held %v, b held %v: read at two moments", a, b)
	assert.True(t, a)
}

// A transaction that lists a pattern twice and acts on the second listing
// must not commit once the table went back to the first listing (ABA on
// names): every listing is guarded, not only the first of a pattern.
func TestKeysEveryListingIsGuarded(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := ctxT(t)
	mustAcquire(t, n, "res:1", "x", time.Minute)
	attempts := 0
	var second int
	require.NoError(t, n.Update(ctx, []string{"out"}, func(tx *Tx) error {
		attempts++
		tx.Keys("res:*")
		if attempts == 1 {
			mustAcquire(t, n, "res:2", "y", time.Minute)
		}
		second = len(tx.Keys("res:*"))
		if attempts == 1 {
			_, err := n.Release(ctx, "res:2", "y")
			require.NoError(t, err)
		}
		return tx.Put("out", fsm.KindString, fmt.Sprint(second), 0, false)
	}))
	rec := mustGet(t, n, "out")
	assert.Equal(t, "1", rec, "acted on a listing of two keys the table no longer held (attempts %d)", attempts)
}

func mustGet(t *testing.T, n *Node, key string) string {
	t.Helper()
	var v string
	require.NoError(t, n.Update(ctxT(t), nil, func(tx *Tx) error {
		rec, ok, err := tx.Get(key)
		require.True(t, ok)
		v = rec.Value
		return err
	}))
	return v
}
