package redisbridge

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/fencerlock/fencer/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFormatLevelsThroughTheBridge: INFO and FENCE.PROGRESS say which
// format levels the node reads and which the cluster uses; FENCE.JOIN asks
// the joiner which levels it reads (a real node: joined; an address where
// nothing answers: taken as level 0 and refused by a level-1 cluster, with
// both levels named); FENCE.HEALTH shows each member's level.
func TestFormatLevelsThroughTheBridge(t *testing.T) {
	addr, leader := startBridge(t, nil, nil)
	// Ready, not only leading: the raise comes after the new leader's
	// Barrier, before it serves its first request.
	require.Eventually(t, func() bool { id, _ := leader.Leader(); return id == leader.ID() && leader.Ready() == nil }, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, uint64(1), leader.FormatInUse(), "a cluster of one raises at once, before it is ready")
	ctx := t.Context()
	c := newClient(t, addr)

	info, err := c.Info(ctx, "server").Result()
	require.NoError(t, err)
	assert.Contains(t, info, "fencer_format_readable:1\r\n")
	assert.Contains(t, info, "fencer_format_in_use:1\r\n")

	p, err := c.Do(ctx, "FENCE.PROGRESS").Result()
	require.NoError(t, err)
	fields := flatMap(p)
	assert.Equal(t, "1", fields["format_readable"])
	assert.Equal(t, "1", fields["format_in_use"])

	faddr, follower := startBridge(t, func(cfg *server.Config) { cfg.Join = true }, nil)
	require.NoError(t, c.Do(ctx, "FENCE.JOIN", follower.ID(), follower.RaftAddr(), faddr).Err())

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	silent := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing answers there
	err = c.Do(ctx, "FENCE.JOIN", "n-old", "127.0.0.1:1", silent).Err()
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"n-old" reads format levels up to 0, and the cluster is at format level 1`)
	ms, err := leader.Members(ctx)
	require.NoError(t, err)
	assert.Len(t, ms, 2, "the refused server was not added")

	require.Eventually(t, func() bool {
		hs, err := c.Do(ctx, "FENCE.HEALTH").Result()
		if err != nil {
			return false
		}
		members := flatMap(hs)["members"].([]any)
		for _, m := range members {
			if flatMap(m)["format_readable"] != int64(1) {
				return false
			}
		}
		return len(members) == 2
	}, 10*time.Second, 100*time.Millisecond, "FENCE.HEALTH shows each member's level")
}

// flatMap reads a RESP2 map reply (a flat array of keys and values).
func flatMap(v any) map[string]any {
	a, _ := v.([]any)
	out := map[string]any{}
	for i := 0; i+1 < len(a); i += 2 {
		out[fmt.Sprint(a[i])] = a[i+1]
	}
	return out
}
