package redisbridge

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"github.com/fencerlock/fencer/internal/resp"
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

// startMTLSBridge starts a bridge whose clients must show a certificate
// from ca, and returns its address and the TLS configuration of a client
// it serves.
func startMTLSBridge(t *testing.T, ca *testca.CA) (addr string, good *tls.Config) {
	t.Helper()
	addr, _ = startBridge(t, nil, func(c *Config) {
		c.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, "node")}, ClientCAs: ca.Pool,
			ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	})
	return addr, &tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{ca.Issue(t, "node")}}
}

// RESP over mutual TLS: a client with a certificate from the cluster's CA
// is served; one without a certificate, one from a foreign CA, and a plain
// TCP client are refused.
func TestTLSClientPort(t *testing.T) {
	ca, foreign := testca.New(t, "test CA"), testca.New(t, "test CA")
	addr, good := startMTLSBridge(t, ca)
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
	reply, _, err := f.roundTrip(t.Context(), addr, 2, resp.AppendCommand(nil, []byte("GET"), []byte("k")))
	require.NoError(t, err)
	assert.Equal(t, "$1\r\nv\r\n", string(reply))
}

// A TLS client that hangs up while it waits leaves the queue, as a plain
// one does (TestHangupLeavesTheQueue), although its close_notify alert is
// left unread on the socket in front of the FIN.
func TestTLSHangupLeavesTheQueue(t *testing.T) {
	addr, good := startMTLSBridge(t, testca.New(t, "test CA"))
	client := func() *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: addr, TLSConfig: good, DisableIdentity: true, MaxRetries: -1, ReadTimeout: 15 * time.Second})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	holder := client()
	require.Eventually(t, func() bool {
		return holder.Do(t.Context(), "FENCE.ACQUIRE", "k", "h", 30000).Err() == nil
	}, 10*time.Second, 20*time.Millisecond)

	raw, err := tls.Dial("tcp", addr, good)
	require.NoError(t, err)
	_, err = raw.Write(resp.Command("FENCE.ACQUIRE", "k", "gone", "30000", "WAIT", "20000"))
	require.NoError(t, err)
	time.Sleep(300 * time.Millisecond)

	got := make(chan error, 1)
	go func() {
		got <- client().Do(context.Background(), "FENCE.ACQUIRE", "k", "stays", 30000, "WAIT", 10000).Err()
	}()
	time.Sleep(300 * time.Millisecond)
	require.NoError(t, raw.Close())    // close_notify, then FIN
	time.Sleep(300 * time.Millisecond) // more than the hang-up poll

	require.NoError(t, holder.Do(t.Context(), "FENCE.RELEASE", "k", "h").Err())
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter behind the TLS client that hung up was not granted")
	}
	st, err := holder.Do(t.Context(), "FENCE.STATUS", "k").Slice()
	require.NoError(t, err)
	assert.Equal(t, "stays", st[0])
}
