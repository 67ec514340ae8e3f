package redisbridge

import (
	"testing"

	"github.com/fencerlock/fencer/fsm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSnapshotReplyIsTheTable(t *testing.T) {
	addr, _ := startBridge(t, nil, nil)
	c := newClient(t, addr)
	tok, err := do(t, c, "FENCE.ACQUIRE", "s", "me", 60000)
	require.NoError(t, err)
	_, err = do(t, c, "FENCE.SNAPSHOT", "extra")
	assert.ErrorContains(t, err, "wrong number of arguments")
	v, err := do(t, c, "FENCE.SNAPSHOT")
	require.NoError(t, err)
	data, ok := v.(string)
	require.True(t, ok, "bulk reply, got %T", v)
	_, info, err := fsm.ForNewCluster([]byte(data))
	require.NoError(t, err)
	assert.Equal(t, 1, info.Locks)
	token := uint64(tok.([]any)[0].(int64))
	assert.Equal(t, token, info.MaxToken)
	// The connection still serves after a binary reply.
	pong, err := do(t, c, "PING")
	require.NoError(t, err)
	assert.Equal(t, "PONG", pong)
}
