package redisbridge

import (
	"strings"
	"testing"
	"time"

	"github.com/fencerlock/fencer/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startAuthNode runs a real node (TCP raft transport) and a bridge that
// requires authentication; join means: wait to be added.
func startAuthNode(t *testing.T, join bool) (*server.Node, string) {
	t.Helper()
	addr, node := startBridge(t, func(c *server.Config) { c.Join = join }, withAuth)
	return node, addr
}

// A follower checks the client's permissions, then forwards over a
// connection authenticated as the forwarding user; the leader grants.
func TestAuthenticatedClientThroughAFollower(t *testing.T) {
	leader, _ := startAuthNode(t, false)
	require.Eventually(t, func() bool { id, _ := leader.Leader(); return id == leader.ID() }, 10*time.Second, 20*time.Millisecond)
	follower, faddr := startAuthNode(t, true)
	require.NoError(t, leader.Join(t.Context(), follower.ID(), follower.RaftAddr(), faddr))
	require.Eventually(t, func() bool { id, _ := follower.Leader(); return id == leader.ID() }, 10*time.Second, 20*time.Millisecond)

	rc := dialRaw(t, faddr)
	assert.Equal(t, string(errorLine(noAuth)), rc.do("FENCE.ACQUIRE", "app:1", "me", "10000"))
	require.Equal(t, "+OK\r\n", rc.do("AUTH", "alice", "apw"))
	got := rc.do("FENCE.ACQUIRE", "app:1", "me", "10000")
	assert.True(t, strings.HasPrefix(got, "*2\r\n:"), "granted through the leader: %q", got)
	assert.Equal(t, string(errorLine(noPermKey)), rc.do("FENCE.ACQUIRE", "other", "me", "10000"), "checked on the follower")
	st, held, err := leader.Status(t.Context(), "app:1")
	require.NoError(t, err)
	assert.True(t, held)
	assert.Equal(t, "me", st.Owner)
}
