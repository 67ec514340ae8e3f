package main

import (
	"testing"

	"github.com/fencerlock/fencer/redisbridge"
	"github.com/stretchr/testify/assert"
)

func TestProtectedMode(t *testing.T) {
	withPass := redisbridge.Config{RequirePass: "p"}
	for _, tc := range []struct {
		listen    string
		protected bool
		cfg       redisbridge.Config
		ok        bool
	}{
		{"127.0.0.1:7379", true, redisbridge.Config{}, true},
		{"[::1]:7379", true, redisbridge.Config{}, true},
		{"localhost:7379", true, redisbridge.Config{}, true},
		{"0.0.0.0:7379", true, redisbridge.Config{}, false},
		{":7379", true, redisbridge.Config{}, false},
		{"10.0.0.5:7379", true, redisbridge.Config{}, false},
		{"10.0.0.5:7379", false, redisbridge.Config{}, true},
		{"10.0.0.5:7379", true, withPass, true},
		{"10.0.0.5:7379", true, redisbridge.Config{Users: []redisbridge.User{redisbridge.NewUser("a", "b", "*")}}, true},
	} {
		err := checkProtectedMode(tc.listen, tc.protected, tc.cfg)
		if tc.ok {
			assert.NoError(t, err, "%+v", tc)
		} else {
			assert.ErrorContains(t, err, "protected mode", "%+v", tc)
		}
	}
	u, p := forwardCredentials(withPass)
	assert.Equal(t, [2]string{"default", "p"}, [2]string{u, p})
	u, p = forwardCredentials(redisbridge.Config{ForwardUser: "n", Users: []redisbridge.User{redisbridge.NewUser("n", "np", "*")}})
	assert.Equal(t, [2]string{"n", "np"}, [2]string{u, p})
}

func TestTLSFlags(t *testing.T) {
	s, err := loadCertStore(tlsFlags{})
	assert.NoError(t, err)
	assert.Nil(t, s, "no TLS without --tls-cert-file")
	assert.Nil(t, s.serverConfig())
	assert.Nil(t, s.dialConfig())
	_, err = loadCertStore(tlsFlags{ca: "ca.pem"})
	assert.ErrorContains(t, err, "--tls-ca-cert-file needs --tls-cert-file")
	_, err = loadCertStore(tlsFlags{cert: "/nonexistent.pem", key: "/nonexistent-key.pem"})
	assert.ErrorContains(t, err, "--tls-cert-file")
}

func TestRaftTLSFlagNeedsCertificates(t *testing.T) {
	c, err := raftTLSConfig(tlsFlags{}, nil)
	assert.NoError(t, err)
	assert.Nil(t, c)
	_, err = raftTLSConfig(tlsFlags{raft: true}, nil)
	assert.ErrorContains(t, err, "--raft-tls needs")
	_, err = raftTLSConfig(tlsFlags{raft: true}, &certStore{})
	assert.ErrorContains(t, err, "--raft-tls needs", "no --tls-ca-cert-file")
}
