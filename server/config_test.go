package server

import (
	"fmt"
	"testing"

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
	assert.Equal(t, []string{"DataDir", "MaxTTL", "MaxBatch", "SnapshotRetain", "RaftLogLevel"}, fields)
	assert.ErrorContains(t, err, "server: config MaxBatch: must be positive, got 0")
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
