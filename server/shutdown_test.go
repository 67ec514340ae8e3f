package server

import (
	"bytes"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestCloseOnLeaderTransfersLeadershipFirst(t *testing.T) {
	c := newCluster(t, 3)
	old := c.leader()
	g := mustAcquire(t, old, "held", "me", time.Minute)
	var logs syncBuffer
	old.log = slog.New(slog.NewTextHandler(&logs, nil)).With("node", old.ID())

	start := time.Now()
	require.NoError(t, old.Close())
	closed := time.Since(start)
	c.nodes[c.index(old)] = nil
	assert.Contains(t, logs.String(), "leadership transferred before shutdown")

	// The new leader was chosen by the transfer, before the old one shut
	// down: the followers did not wait out an election timeout.
	next := c.leader()
	handoff := time.Since(start)
	assert.NotEqual(t, old.ID(), next.ID())
	assert.Contains(t, logs.String(), "to="+next.ID())
	t.Logf("Close took %v; a ready leader after %v", closed, handoff)
	assert.Less(t, closed, shutdownTransferTimeout+2*time.Second)

	// No lock lost: same owner, same token, and the holder may extend it.
	s := mustStatus(t, next, "held")
	assert.Equal(t, "me", s.Owner)
	assert.Equal(t, g.Token, s.Token)
	ok, err := next.Extend(ctxT(t), "held", "me", time.Minute)
	require.NoError(t, err)
	assert.True(t, ok)
	g2 := mustAcquire(t, next, "new", "me", time.Minute)
	assert.Greater(t, g2.Token, g.Token)
}

// A leader whose followers are gone (stopped first, as when a whole cluster
// is stopped) starts a transfer that raft reports done when the leader steps
// down for want of a quorum; Close sees that no new leader is coming and
// goes on at once instead of waiting out shutdownTransferTimeout for one.
func TestCloseOnLeaderWithoutAQuorumDoesNotWaitForANewLeader(t *testing.T) {
	c := newCluster(t, 3)
	leader := c.leader()
	for i, n := range c.nodes {
		if n != leader {
			require.NoError(t, n.Close())
			c.nodes[i] = nil
		}
	}
	var logs syncBuffer
	leader.log = slog.New(slog.NewTextHandler(&logs, nil))
	// It steps down 0.5-1 s after it last heard from the second follower;
	// closing that follower takes milliseconds.
	require.Equal(t, raft.Leader, leader.raft.State(), "the leader stepped down before Close: the test needs it leading")
	start := time.Now()
	require.NoError(t, leader.Close())
	closed := time.Since(start)
	t.Logf("Close took %v", closed)
	// (Raft's own transfer timer, 1 s, sometimes ends the transfer with an
	// error first; then Close goes on at once as it always did.)
	assert.NotContains(t, logs.String(), "leadership transferred before shutdown")
	// Raft's leader steps down 0.5-1 s after it last heard from a quorum
	// (LeaderLeaseTimeout); stepDownGrace adds 1 s. Without the check,
	// Close waits out shutdownTransferTimeout (5 s).
	assert.Less(t, closed, shutdownTransferTimeout-time.Second, "Close waited for a leader no node could elect; its log:\n%s", logs.String())
}

func TestCloseOnLoneLeaderDoesNotTransfer(t *testing.T) {
	n := openNode(t, t.TempDir())
	var logs syncBuffer
	n.log = slog.New(slog.NewTextHandler(&logs, nil))
	start := time.Now()
	require.NoError(t, n.Close())
	assert.Less(t, time.Since(start), 2*time.Second)
	assert.NotContains(t, logs.String(), "leadership transfer")
}

// Close takes a snapshot when the log has grown far past the last one, so
// that the next start restores it instead of replaying every entry.
func TestCloseSnapshotsALongLog(t *testing.T) {
	dir := t.TempDir()
	n := openNode(t, dir, func(c *Config) { c.SnapshotThreshold = 1 << 30 })
	var wg sync.WaitGroup
	for w := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < shutdownSnapshotMin+100; i += 64 {
				mustAcquire(t, n, "k"+strconv.Itoa(i), "o", time.Hour)
			}
		}()
	}
	wg.Wait()
	applied := n.table.LastIndex()
	require.NoError(t, n.Close())

	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 1, hclog.NewNullLogger())
	require.NoError(t, err)
	list, err := snaps.List()
	require.NoError(t, err)
	require.NotEmpty(t, list, "no snapshot taken at Close")
	assert.GreaterOrEqual(t, list[0].Index, applied, "the snapshot holds every entry")

	n = openNode(t, dir, func(c *Config) { c.SnapshotThreshold = 1 << 30 })
	assert.Equal(t, shutdownSnapshotMin+100, n.table.Len())
}
