package server

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/fencerlock/fencer/fsm"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Concurrent requests on a real node share Raft entries (group commit), each
// still answered with its own outcome and token; after a restart that replays
// those entries from the log, the table and the tokens are the same.
func TestGroupCommit(t *testing.T) {
	dir := t.TempDir()
	n := openNode(t, dir, func(c *Config) { c.SnapshotThreshold = 1 << 30 })
	entries0, cmds0 := n.batch.stats()

	const clients, rounds = 48, 20
	tokens := make([][]uint64, clients)
	var wg sync.WaitGroup
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				key := "k" + strconv.Itoa(w)
				owner := "o" + strconv.Itoa(w) + "-" + strconv.Itoa(r)
				g := mustAcquire(t, n, key, owner, time.Hour)
				tokens[w] = append(tokens[w], g.Token)
				if r < rounds-1 {
					ok, err := n.Release(context.Background(), key, owner)
					assert.NoError(t, err)
					assert.True(t, ok)
				}
			}
		}()
	}
	wg.Wait()

	entries, cmds := n.batch.stats()
	entries, cmds = entries-entries0, cmds-cmds0
	assert.EqualValues(t, clients*(2*rounds-1), cmds, "every request is one command")
	assert.Less(t, entries, cmds/2, "concurrent commands share entries")
	t.Logf("%d commands in %d entries", cmds, entries)

	seen := map[uint64]bool{}
	for w, ts := range tokens {
		for i, tok := range ts {
			assert.False(t, seen[tok], "token %d granted twice", tok)
			seen[tok] = true
			if i > 0 {
				assert.Greater(t, tok, ts[i-1], "client %d: tokens of its key grow", w)
			}
		}
	}
	want := map[string]fsm.Lease{}
	n.table.Range(func(k string, l fsm.Lease) { l.Deadline = 0; want[k] = l })
	_, info, err := fsm.ForNewCluster(n.table.MarshalSnapshot())
	require.NoError(t, err)
	maxToken := info.MaxToken // the largest token ever granted
	require.NoError(t, n.Close())

	// Reopen: no snapshot was taken, so every batch is replayed.
	n = openNode(t, dir, func(c *Config) { c.SnapshotThreshold = 1 << 30 })
	got := map[string]fsm.Lease{}
	n.table.Range(func(k string, l fsm.Lease) { l.Deadline = 0; got[k] = l })
	for k, l := range want {
		assert.Equal(t, l, got[k], "lease of %s after replay", k)
	}
	g := mustAcquire(t, n, "fresh", "o", time.Second)
	assert.Greater(t, g.Token, maxToken)
}

// With MaxBatch 1 every command has an entry of its own.
func TestGroupCommitOff(t *testing.T) {
	n := openNode(t, t.TempDir(), func(c *Config) { c.MaxBatch = 1 })
	entries0, cmds0 := n.batch.stats()
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mustAcquire(t, n, "k"+strconv.Itoa(w), "o", time.Hour)
		}()
	}
	wg.Wait()
	entries, cmds := n.batch.stats()
	assert.EqualValues(t, 16, cmds-cmds0)
	assert.Equal(t, cmds-cmds0, entries-entries0)
}

// The batcher on its own, over a stand-in for Raft that commits when told:
// while an entry is in flight the next commands wait and go in one entry,
// at most maxCmds of them, in the order submitted; an entry's error reaches
// each of its commands; stop answers what is still queued. (A stand-in,
// because a real Raft cannot be held mid-commit on demand.)
func TestBatcherGroupsWhileAnEntryIsInFlight(t *testing.T) {
	apply, sentCh := heldRaft(t)
	b := newBatcher(apply, 3, 1)

	type answer struct {
		key string
		res *fsm.Result
		err error
	}
	answers := make(chan answer, 16)
	submit := func(key string) {
		b.submit(fsm.Command{Op: fsm.OpRevoke, Key: key}.Encode(nil), func(r *fsm.Result, err error) {
			answers <- answer{key, r, err}
		})
	}
	submit("a")
	first := <-sentCh
	require.Len(t, first.cmds, 1, "an idle batcher sends at once")
	for _, k := range []string{"b", "c", "d", "e"} {
		submit(k)
	}
	select {
	case s := <-sentCh:
		t.Fatalf("sent %v while an entry was in flight", s.cmds)
	case <-time.After(50 * time.Millisecond):
	}
	first.f.finish(&fsm.Result{Code: fsm.Revoked}, nil)
	a := <-answers
	assert.Equal(t, "a", a.key)
	assert.Equal(t, fsm.Revoked, a.res.Code)

	second := <-sentCh
	require.Len(t, second.cmds, 3, "at most maxCmds")
	assert.Equal(t, []string{"b", "c", "d"}, []string{second.cmds[0].Key, second.cmds[1].Key, second.cmds[2].Key})
	second.f.finish(nil, raft.ErrLeadershipLost)
	for range 3 {
		a := <-answers
		assert.ErrorIs(t, a.err, raft.ErrLeadershipLost, a.key)
	}
	third := <-sentCh
	require.Len(t, third.cmds, 1)
	assert.Equal(t, "e", third.cmds[0].Key)

	submit("f") // queued behind the entry in flight
	b.stop()
	a = <-answers
	assert.Equal(t, "f", a.key)
	assert.ErrorIs(t, a.err, raft.ErrRaftShutdown)
	submit("g")
	a = <-answers
	assert.ErrorIs(t, a.err, raft.ErrRaftShutdown, "after stop")
	third.f.finish(&fsm.Result{}, nil)
	assert.Equal(t, "e", (<-answers).key, "an entry sent before stop is still answered")
}

// sentEntry is an entry the batcher sent to heldRaft.
type sentEntry struct {
	cmds []fsm.Command
	size int
	f    *heldFuture
}

// heldRaft is the stand-in for Raft's Apply: each entry sent is decoded and
// handed to the test with a future it completes when it chooses.
func heldRaft(t *testing.T) (func([]byte) raft.ApplyFuture, chan sentEntry) {
	sent := make(chan sentEntry, 16)
	return func(data []byte) raft.ApplyFuture {
		cmds, err := fsm.DecodeEntry(data)
		require.NoError(t, err)
		f := &heldFuture{done: make(chan struct{})}
		sent <- sentEntry{cmds, len(data), f}
		return f
	}, sent
}

// heldFuture is a raft.ApplyFuture that completes when finish is called.
type heldFuture struct {
	done chan struct{}
	res  interface{}
	err  error
}

func (f *heldFuture) finish(res interface{}, err error) {
	f.res, f.err = res, err
	close(f.done)
}
func (f *heldFuture) Error() error          { <-f.done; return f.err }
func (f *heldFuture) Response() interface{} { <-f.done; return f.res }
func (f *heldFuture) Index() uint64         { return 0 }

// A snapshot is taken once SnapshotThreshold commands were applied, even when
// batches kept the entries below it (Raft counts only entries).
func TestSnapshotCountsCommandsNotEntries(t *testing.T) {
	dir := t.TempDir()
	n := openNode(t, dir, func(c *Config) {
		c.SnapshotThreshold = 400
		c.SnapshotInterval = 50 * time.Millisecond
	})
	var wg sync.WaitGroup
	for w := range 48 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range 10 {
				mustAcquire(t, n, "k"+strconv.Itoa(w)+"-"+strconv.Itoa(r), "o", time.Hour)
			}
		}()
	}
	wg.Wait()
	entries, cmds := n.batch.stats()
	require.Less(t, entries, uint64(400), "the test needs the entries below the threshold")
	require.GreaterOrEqual(t, cmds, uint64(480))
	require.Eventually(t, func() bool {
		list, err := raft.NewFileSnapshotStoreWithLogger(dir, 1, nil)
		if err != nil {
			return false
		}
		metas, err := list.List()
		return err == nil && len(metas) > 0
	}, 5*time.Second, 20*time.Millisecond, "no snapshot after %d commands in %d entries", cmds, entries)
}

// Each command of a batch gets its own result from the slice Raft answers
// with; commands that would not fit in fsm.MaxEntrySize together go in
// entries of their own. (The same stand-in for Raft as above.)
func TestBatcherAnswersEachCommandAndBoundsEntries(t *testing.T) {
	apply, sentCh := heldRaft(t)
	b := newBatcher(apply, 8, 1)
	defer b.stop()
	answers := make(chan *fsm.Result, 16)
	submit := func(c fsm.Command) {
		b.submit(c.Encode(nil), func(r *fsm.Result, err error) {
			assert.NoError(t, err)
			answers <- r
		})
	}

	submit(fsm.Command{Op: fsm.OpRevoke, Key: "a"})
	first := <-sentCh
	for _, k := range []string{"b", "c", "d"} {
		submit(fsm.Command{Op: fsm.OpRevoke, Key: k})
	}
	first.f.finish(&fsm.Result{Cmd: &first.cmds[0]}, nil)
	assert.Equal(t, "a", (<-answers).Cmd.Key)
	second := <-sentCh
	require.Len(t, second.cmds, 3)
	results := make([]*fsm.Result, 3)
	for i := range second.cmds {
		results[i] = &fsm.Result{Cmd: &second.cmds[i], Position: uint64(10 + i)}
	}
	second.f.finish(results, nil)
	for i := range 3 {
		r := <-answers
		assert.Equal(t, uint64(10+i), r.Position)
		assert.Equal(t, string(rune('b'+i)), r.Cmd.Key, "each command gets its own result")
	}

	big := func(key string) fsm.Command {
		return fsm.Command{Op: fsm.OpPut, Key: key, Owner: string(make([]byte, fsm.MaxValueLen))}
	}
	submit(fsm.Command{Op: fsm.OpRevoke, Key: "e"})
	held := <-sentCh
	submit(big("x"))
	submit(big("y"))
	held.f.finish(&fsm.Result{Cmd: &held.cmds[0]}, nil)
	<-answers
	for _, want := range []string{"x", "y"} {
		s := <-sentCh
		require.Len(t, s.cmds, 1, "two such commands exceed fsm.MaxEntrySize together")
		assert.Equal(t, want, s.cmds[0].Key[:1])
		assert.LessOrEqual(t, s.size, fsm.MaxEntrySize)
		s.f.finish(&fsm.Result{Cmd: &s.cmds[0]}, nil)
		<-answers
	}
}

// A request's own goroutine sends the entry when nothing is in flight
// (submitAndSend returns with it sent), and the goroutine that sees an entry
// committed sends the next one before it answers the first's commands: Raft
// waits on neither a wake-up of the batcher's loop. (The stand-in for Raft.)
func TestBatcherSendsFromTheCallerAndBeforeAnswering(t *testing.T) {
	apply, sentCh := heldRaft(t)
	b := newBatcher(apply, 8, 1)
	defer b.stop()
	answers := make(chan string, 16)
	submit := func(key string) {
		b.submitAndSend(fsm.Command{Op: fsm.OpRevoke, Key: key}.Encode(nil), func(r *fsm.Result, err error) {
			assert.NoError(t, err)
			answers <- key
		})
	}
	sentNow := func() sentEntry {
		t.Helper()
		select {
		case s := <-sentCh:
			return s
		default:
			t.Fatal("no entry sent yet")
			return sentEntry{}
		}
	}

	submit("a")
	first := sentNow()
	require.Len(t, first.cmds, 1)
	submit("b")
	submit("c")
	select {
	case s := <-sentCh:
		t.Fatalf("sent %v while an entry was in flight", s.cmds)
	default:
	}
	first.f.finish(&fsm.Result{}, nil)
	assert.Equal(t, "a", <-answers)
	second := sentNow()
	require.Len(t, second.cmds, 2)
	assert.Equal(t, "b", second.cmds[0].Key)
	assert.Equal(t, "c", second.cmds[1].Key)
	second.f.finish([]*fsm.Result{{}, {}}, nil)
	assert.Equal(t, "b", <-answers)
	assert.Equal(t, "c", <-answers)
}

// A request whose context ends while its command waits in the batcher's queue
// gets the context's error and its command never reaches Raft; once the
// command was sent, the same ending gives ErrUnknownOutcome. (propose on a
// Node holding only a batcher over the stand-in for Raft: a real Raft cannot
// be held mid-commit on demand.)
func TestProposeWithdrawsACommandStillQueued(t *testing.T) {
	apply, sentCh := heldRaft(t)
	n := &Node{batch: newBatcher(apply, 8, 1)}
	defer n.batch.stop()
	queued := func() int {
		n.batch.mu.Lock()
		defer n.batch.mu.Unlock()
		return len(n.batch.queue)
	}

	inflightCtx, cancelInflight := context.WithCancel(context.Background())
	inflightErr := make(chan error, 1)
	go func() {
		_, err := n.propose(inflightCtx, fsm.Command{Op: fsm.OpRevoke, Key: "a"})
		inflightErr <- err
	}()
	first := <-sentCh

	ctx, cancel := context.WithCancel(context.Background())
	queuedErr := make(chan error, 1)
	go func() {
		_, err := n.propose(ctx, fsm.Command{Op: fsm.OpRevoke, Key: "b"})
		queuedErr <- err
	}()
	require.Eventually(t, func() bool { return queued() == 1 }, 5*time.Second, time.Millisecond)
	cancel()
	err := <-queuedErr
	assert.ErrorIs(t, err, context.Canceled)
	assert.NotErrorIs(t, err, ErrUnknownOutcome, "withdrawn before it was sent: a definite failure")
	assert.Zero(t, queued())

	cancelInflight()
	err = <-inflightErr
	assert.ErrorIs(t, err, ErrUnknownOutcome, "already sent to Raft")

	go func() { _, _ = n.propose(context.Background(), fsm.Command{Op: fsm.OpRevoke, Key: "c"}) }()
	require.Eventually(t, func() bool { return queued() == 1 }, 5*time.Second, time.Millisecond)
	first.f.finish(&fsm.Result{}, nil)
	next := <-sentCh
	require.Len(t, next.cmds, 1)
	assert.Equal(t, "c", next.cmds[0].Key, "the withdrawn command is not in the next entry")
	next.f.finish(&fsm.Result{}, nil)
}

// A command still queued when the node stops never reached Raft: propose
// answers ErrShutdown, a definite failure, not ErrUnknownOutcome; the one
// already sent stays unknown until Raft answers it. (The stand-in for Raft.)
func TestProposeQueuedAtStopIsShutdown(t *testing.T) {
	apply, sentCh := heldRaft(t)
	n := &Node{batch: newBatcher(apply, 8, 1)}
	go func() { _, _ = n.propose(context.Background(), fsm.Command{Op: fsm.OpRevoke, Key: "a"}) }()
	first := <-sentCh
	errs := make(chan error, 1)
	go func() {
		_, err := n.propose(context.Background(), fsm.Command{Op: fsm.OpRevoke, Key: "b"})
		errs <- err
	}()
	require.Eventually(t, func() bool {
		n.batch.mu.Lock()
		defer n.batch.mu.Unlock()
		return len(n.batch.queue) == 1
	}, 5*time.Second, time.Millisecond)
	n.batch.stop()
	err := <-errs
	assert.ErrorIs(t, err, ErrShutdown)
	assert.NotErrorIs(t, err, ErrUnknownOutcome)
	first.f.finish(nil, raft.ErrRaftShutdown)
}
