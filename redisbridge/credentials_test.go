package redisbridge

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Credentials is AUTH's check, for the web console's login.
func TestCredentials(t *testing.T) {
	none := DefaultConfig()
	_, err := none.Credentials()
	assert.ErrorContains(t, err, "nobody could log in")

	cfg := DefaultConfig()
	cfg.RequirePass = "root-pass"
	cfg.Users = []User{NewUser("app", "app-pass", "app:*")}
	creds, err := cfg.Credentials()
	require.NoError(t, err)
	u, ok := creds.Check("app", "app-pass")
	assert.True(t, ok)
	assert.Equal(t, "app:*", u.Pattern)
	assert.Empty(t, u.Password, "the password is not handed out")
	u, ok = creds.Check(DefaultUser, "root-pass")
	assert.True(t, ok)
	assert.Equal(t, "*", u.Pattern, "--requirepass's user is an admin")
	for _, bad := range [][2]string{{"app", "root-pass"}, {"app", ""}, {"nobody", "app-pass"}, {"", "root-pass"}} {
		_, ok := creds.Check(bad[0], bad[1])
		assert.False(t, ok, "%q", bad)
	}

	bad := DefaultConfig()
	bad.Users = []User{NewUser("app", "app-pass", "app:*")}
	_, err = bad.Credentials()
	assert.ErrorContains(t, err, "ForwardUser", "the table's own checks apply")
}
