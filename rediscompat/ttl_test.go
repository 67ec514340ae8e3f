package rediscompat

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A Redis command's TTL keeps Redis's range, whatever --min-ttl and
// --max-ttl (server.Config.MinTTL, MaxTTL) say: they bound native leases
// and sessions. A TTL is never shortened below what the client asked for
// (up to the 100-year cap), as a holder would keep working after the lock
// was handed on. (issue 31, item 6)
func TestRedisTTLsKeepRedisRange(t *testing.T) {
	e, _ := newEngine(t, Config{})
	s := &Session{}
	require.Equal(t, replyOK, do(t, e, s, "SET", "short", "v", "NX", "PX", "50"))
	ttl := do(t, e, s, "PTTL", "short")
	require.IsType(t, Int(0), ttl)
	assert.LessOrEqual(t, int64(ttl.(Int)), int64(50), "below --min-ttl, as asked")
	require.Equal(t, replyOK, do(t, e, s, "SET", "long", "v", "NX", "PX", "99999999999"))
	ttl = do(t, e, s, "PTTL", "long")
	assert.InDelta(t, 99999999999, int64(ttl.(Int)), 5000, "beyond --max-ttl, as asked, not shortened")
	require.Equal(t, Int(1), do(t, e, s, "PEXPIRE", "long", "31557600000000"))
	ttl = do(t, e, s, "PTTL", "long")
	assert.InDelta(t, 3153600000000, int64(ttl.(Int)), 5000, "malkusch/lock's default (a thousand years) is kept as 100 years")
}
