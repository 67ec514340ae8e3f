package main

import (
	"testing"

	"github.com/fencerlock/fencer/redisbridge"
	"github.com/stretchr/testify/assert"
)

func TestCheckUI(t *testing.T) {
	withPass := redisbridge.Config{RequirePass: "p"}
	withUsers := redisbridge.Config{Users: []redisbridge.User{redisbridge.NewUser("a", "b", "*")}}
	certs := &certStore{}
	for _, tc := range []struct {
		addr      string
		protected bool
		cfg       redisbridge.Config
		certs     *certStore
		want      string // "" for accepted
	}{
		{"", true, redisbridge.Config{}, nil, ""},
		{"127.0.0.1:7382", true, withPass, nil, ""},
		{"[::1]:7382", true, withUsers, nil, ""},
		{"localhost:7382", true, withUsers, nil, ""},
		{"127.0.0.1:7382", true, redisbridge.Config{}, nil, "--ui needs --users or --requirepass"},
		{"10.0.0.5:7382", false, redisbridge.Config{}, certs, "--ui needs --users or --requirepass"},
		{"0.0.0.0:7382", true, withPass, nil, "protected mode"},
		{":7382", true, withPass, nil, "protected mode"},
		{"10.0.0.5:7382", true, withUsers, nil, "protected mode"},
		{"10.0.0.5:7382", false, withUsers, nil, ""},
		{"0.0.0.0:7382", true, withPass, certs, ""},
	} {
		err := checkUI(tc.addr, tc.protected, tc.cfg, tc.certs)
		if tc.want == "" {
			assert.NoError(t, err, "%+v", tc)
		} else {
			assert.ErrorContains(t, err, tc.want, "%+v", tc)
		}
	}
}
