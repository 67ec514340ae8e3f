package redisbridge

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// issue makes a certificate for 127.0.0.1, usable by servers and clients.
func (ca *testCA) issue(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "node"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

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
	ca, foreign := newTestCA(t), newTestCA(t)
	addr := startLimited(t, nil, func(c *Config) {
		c.TLS = &tls.Config{Certificates: []tls.Certificate{ca.issue(t)}, ClientCAs: ca.pool,
			ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	})
	good := &tls.Config{RootCAs: ca.pool, Certificates: []tls.Certificate{ca.issue(t)}}
	require.NoError(t, tlsPing(t, addr, good))
	c := redis.NewClient(&redis.Options{Addr: addr, TLSConfig: good, DisableIdentity: true})
	defer c.Close()
	ok, err := c.SetNX(t.Context(), "k", "v", 5*time.Second).Result()
	require.NoError(t, err)
	assert.True(t, ok)

	assert.Error(t, tlsPing(t, addr, &tls.Config{RootCAs: ca.pool}), "no client certificate")
	assert.Error(t, tlsPing(t, addr, &tls.Config{RootCAs: ca.pool, Certificates: []tls.Certificate{foreign.issue(t)}}), "foreign CA")
	assert.Error(t, tlsPing(t, addr, &tls.Config{RootCAs: foreign.pool, Certificates: []tls.Certificate{ca.issue(t)}}), "server not trusted")
	assert.Error(t, tlsPing(t, addr, nil), "plain TCP")
	require.NoError(t, tlsPing(t, addr, good), "still serving")

	// The forwarder dials a TLS leader with its node certificate.
	f := newForwarder(nil, good)
	defer f.close()
	reply, _, err := f.roundTrip(t.Context(), addr, 2, encodeCommand([]byte("GET"), []byte("k")))
	require.NoError(t, err)
	assert.Equal(t, "$1\r\nv\r\n", string(reply))
}
