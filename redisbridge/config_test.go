package redisbridge

import (
	"testing"
	"time"

	"github.com/fencerlock/fencer/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// quietConfig is DefaultConfig with requestTimeout and no logs.
func quietConfig(requestTimeout time.Duration) Config {
	c := DefaultConfig()
	c.RequestTimeout, c.Logger = requestTimeout, quiet
	return c
}

// Validate reports every invalid field by name; a zero is not taken for
// the default, except where zero has a meaning of its own.
func TestConfigValidate(t *testing.T) {
	c := DefaultConfig()
	require.NoError(t, c.Validate())
	c.IdleTimeout = 0
	require.NoError(t, c.Validate(), "IdleTimeout 0: never")

	err := (&Config{}).Validate()
	var fields []string
	for _, e := range server.ConfigErrors(err) {
		assert.Equal(t, "redisbridge", e.Pkg)
		fields = append(fields, e.Field)
	}
	assert.Equal(t, []string{"RequestTimeout", "ScriptTimeLimit", "MaxArgs", "MaxBulkLen", "MaxClients", "MaxPipeline"}, fields)

	c = DefaultConfig()
	c.IdleTimeout = -time.Second
	c.ForwardUser = "nobody"
	fields = nil
	for _, e := range server.ConfigErrors(c.Validate()) {
		fields = append(fields, e.Field)
	}
	assert.Equal(t, []string{"IdleTimeout", "ForwardUser"}, fields)

	_, err = New(nil, Config{})
	assert.ErrorContains(t, err, "redisbridge: config RequestTimeout: must be positive")
}
