package redisbridge

import (
	"crypto/tls"
	"testing"
	"time"

	"github.com/fencerlock/fencer/internal/testca"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func tlsPing(t *testing.T, addr string, cfg *tls.Config) error {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, TLSConfig: cfg, DisableIdentity: true, MaxRetries: -1,
		DialTimeout: 5 * time.Second, ReadTimeout: 5 * time.Second})
	defer c.Close()
	return c.Ping(t.Context()).Err()
}

// RESP over mutual TLS: a client with a certificate from the cluster's CA
// is served; one without a certificate, one from a foreign CA, and a plain
// TCP client are refused.
func TestTLSClientPort(t *testing.T) {
	ca, foreign := testca.New(t, "test CA"), testca.New(t, "test CA")
	addr := startLimited(t, nil, func(c *Config) {
		c.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, "node")}, ClientCAs: ca.Pool,
			ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	})
	good := &tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{ca.Issue(t, "node")}}
	require.NoError(t, tlsPing(t, addr, good))
	c := redis.NewClient(&redis.Options{Addr: addr, TLSConfig: good, DisableIdentity: true})
	defer c.Close()
	ok, err := c.SetNX(t.Context(), "k", "v", 5*time.Second).Result()
	require.NoError(t, err)
	assert.True(t, ok)

	assert.Error(t, tlsPing(t, addr, &tls.Config{RootCAs: ca.Pool}), "no client certificate")
	assert.Error(t, tlsPing(t, addr, &tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{foreign.Issue(t, "node")}}), "foreign CA")
	assert.Error(t, tlsPing(t, addr, &tls.Config{RootCAs: foreign.Pool, Certificates: []tls.Certificate{ca.Issue(t, "node")}}), "server not trusted")
	assert.Error(t, tlsPing(t, addr, nil), "plain TCP")
	require.NoError(t, tlsPing(t, addr, good), "still serving")

	// The forwarder dials a TLS leader with its node certificate.
	f := newForwarder(nil, good)
	defer f.close()
	reply, _, err := f.roundTrip(t.Context(), addr, 2, encodeCommand([]byte("GET"), []byte("k")))
	require.NoError(t, err)
	assert.Equal(t, "$1\r\nv\r\n", string(reply))
}
