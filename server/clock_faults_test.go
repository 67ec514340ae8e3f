//go:build fencer_faults

package server

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFaultClockRate: FENCER_CLOCK_RATE makes a node's lease clock run at a
// factor of real time. A waiter queued behind a lease that is left to
// expire is granted when the leader's lease clock has counted the TTL: after
// about TTL/2 of real time at factor 2, about 2×TTL at 0.5, and no earlier
// than the TTL at 1.
func TestFaultClockRate(t *testing.T) {
	tests := []struct {
		rate     string
		ttl      time.Duration
		min, max time.Duration // real time from the holder's request to the waiter's grant
	}{
		{"2", 2 * time.Second, 900 * time.Millisecond, 1600 * time.Millisecond},
		{"0.5", time.Second, 1900 * time.Millisecond, 3 * time.Second},
		{"1", time.Second, time.Second, 1600 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run("rate="+tc.rate, func(t *testing.T) {
			t.Setenv(clockRateEnv, tc.rate)
			n := openNode(t, t.TempDir())
			require.Equal(t, tc.rate, strconv.FormatFloat(n.grants.lessor.clock.rate, 'g', -1, 64), "the node read its rate")
			ctx := ctxT(t)
			sent := time.Now()
			g := mustAcquire(t, n, "k", "holder", tc.ttl)
			w, ok, err := n.Acquire(ctx, "k", "waiter", 5*time.Second, 5*time.Second)
			elapsed := time.Since(sent)
			require.NoError(t, err)
			require.True(t, ok, "the waiter was not granted within 5 s")
			assert.Greater(t, w.Token, g.Token)
			assert.GreaterOrEqual(t, elapsed, tc.min, "lease of %v at rate %s freed too soon", tc.ttl, tc.rate)
			assert.LessOrEqual(t, elapsed, tc.max, "lease of %v at rate %s freed too late", tc.ttl, tc.rate)
			t.Logf("TTL %v at rate %s: freed after %v of real time", tc.ttl, tc.rate, elapsed.Round(time.Millisecond))
		})
	}
}

// TestFaultClockRateInvalid: a value that is not a positive factor stops
// the node instead of being ignored.
func TestFaultClockRateInvalid(t *testing.T) {
	for _, v := range []string{"0", "-1", "fast", "NaN", "+Inf"} {
		t.Setenv(clockRateEnv, v)
		assert.Panics(t, func() { newLeaseClock() }, "FENCER_CLOCK_RATE=%s", v)
	}
	t.Setenv(clockRateEnv, "")
	c := newLeaseClock()
	assert.Equal(t, time.Second, c.leaseTime(time.Second), "unset: real time")
	assert.Equal(t, time.Second, c.realTime(time.Second), "unset: real time")
}
