package server

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Validate reports every invalid field, not only the first, each as a
// ConfigError that names it.
func TestConfigValidateReportsEveryField(t *testing.T) {
	c := DefaultConfig()
	c.DataDir = ""
	c.MaxTTL = c.MinTTL / 2
	c.MaxBatch = 0
	c.SnapshotRetain = 0
	c.RaftLogLevel = "loud"
	err := c.Validate()
	require.Error(t, err)
	var fields []string
	for _, e := range ConfigErrors(err) {
		assert.Equal(t, "server", e.Pkg)
		assert.NotEmpty(t, e.Reason)
		fields = append(fields, e.Field)
	}
	// (DefaultLockTTL, 30s, is no longer within MinTTL..MaxTTL either.)
	assert.Equal(t, []string{"DataDir", "MaxTTL", "DefaultLockTTL", "MaxBatch", "SnapshotRetain", "RaftLogLevel"}, fields)
	assert.ErrorContains(t, err, "server: config MaxBatch: must be positive, got 0")
}

// The default lock TTL is a lease the node grants: within MinTTL..MaxTTL.
func TestConfigValidateDefaultLockTTL(t *testing.T) {
	for ttl, ok := range map[time.Duration]bool{
		0: false, 50 * time.Millisecond: false, 100 * time.Millisecond: true,
		30 * time.Second: true, 24 * time.Hour: true, 25 * time.Hour: false,
	} {
		c := DefaultConfig()
		c.DataDir, c.DefaultLockTTL = t.TempDir(), ttl
		err := c.Validate()
		if ok {
			assert.NoError(t, err, "%v", ttl)
			continue
		}
		require.Len(t, ConfigErrors(err), 1, "%v", ttl)
		assert.Equal(t, "DefaultLockTTL", ConfigErrors(err)[0].Field, "%v", ttl)
	}
}

func TestConfigErrorsFindsWrappedErrors(t *testing.T) {
	a := &ConfigError{Pkg: "server", Field: "A", Reason: "bad"}
	b := &ConfigError{Pkg: "redisbridge", Field: "B", Reason: "bad"}
	err := fmt.Errorf("starting: %w", fmt.Errorf("%w; %w", a, fmt.Errorf("x: %w", b)))
	assert.Equal(t, []*ConfigError{a, b}, ConfigErrors(err))
	assert.Empty(t, ConfigErrors(fmt.Errorf("plain")))
	assert.Empty(t, ConfigErrors(nil))
	assert.Equal(t, "redisbridge: config B: bad", b.Error())
}
