package server

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A multi-key acquire sent again (after UNCERTAIN) when its first attempt
// was granted and some of the keys have since run out, or been taken, never
// answers a grant, nor "nothing done": it answers that the lease was lost,
// and releases the keys the owner still holds. (issue 31, item 4)
func TestAcquireManyResendAfterPartialLoss(t *testing.T) {
	n := openNode(t, t.TempDir(), func(c *Config) { c.MinTTL = 50 * time.Millisecond })
	for _, tc := range []struct {
		name string
		lose func(t *testing.T)
	}{
		{"ran out", func(t *testing.T) {
			require.Eventually(t, func() bool { _, held, _ := n.Status(ctxT(t), "ran out/k2"); return !held },
				10*time.Second, 5*time.Millisecond)
		}},
		{"taken", func(t *testing.T) {
			ok, err := n.Revoke(ctxT(t), "taken/k2")
			require.NoError(t, err)
			require.True(t, ok)
			mustAcquire(t, n, "taken/k2", "other", time.Minute)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys := []string{tc.name + "/k1", tc.name + "/k2"}
			a := MultiAcquire{Keys: keys, Owner: "o", TTL: 300 * time.Millisecond, Wait: time.Second}
			// The first attempt: granted (its answer lost to the caller).
			g, ok, err := n.AcquireMany(ctxT(t), a)
			require.NoError(t, err)
			require.True(t, ok)
			ok, err = n.Extend(ctxT(t), keys[0], "o", time.Minute)
			require.NoError(t, err)
			require.True(t, ok)
			tc.lose(t)

			_, granted, err := n.AcquireMany(ctxT(t), a)
			assert.False(t, granted, "a grant the owner no longer wholly holds")
			require.Error(t, err)
			assert.False(t, errors.Is(err, ErrInvalidArgument), "not 'nothing done': %v", err)
			assert.False(t, errors.Is(err, ErrUnknownOutcome), "%v", err)
			assert.Contains(t, err.Error(), "lease lost")
			st, held, serr := n.Status(ctxT(t), keys[0])
			require.NoError(t, serr)
			assert.False(t, held && st.Owner == "o" && st.Token == g.Token, "the key still held is released")
		})
	}
}
