package client_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencerlock/fencer/client"
	"github.com/fencerlock/fencer/internal/testca"
	"github.com/fencerlock/fencer/redisbridge"
)

// mtlsNode starts a node that serves RESP over mutual TLS, as fencerd
// --tls-cert-file --tls-key-file --tls-ca-cert-file (--tls-auth-clients is
// on by default), and returns its address and the client configuration that
// gets through.
func mtlsNode(t *testing.T, ca *testca.CA) (string, *tls.Config) {
	t.Helper()
	good := &tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{ca.Issue(t, "node")}}
	addr, _ := secureNode(t, func(c *redisbridge.Config) {
		c.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, "node")}, ClientCAs: ca.Pool,
			ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	}, client.WithTLS(good))
	return addr, good
}

func TestTLSClientGetsALock(t *testing.T) {
	t.Parallel()
	ca := testca.New(t, "fencer test CA")
	addr, good := mtlsNode(t, ca)
	c := clientOf(t, []string{addr}, client.WithTLS(good))
	l, err := c.TryAcquire(ctxT(t, 10*time.Second), "tls/lease", client.WithAutoRenew(), client.WithTTL(time.Second))
	if err != nil {
		t.Fatalf("TryAcquire over TLS: %v", err)
	}
	if l.Token() == 0 {
		t.Fatal("granted with token 0")
	}
	time.Sleep(1200 * time.Millisecond) // renewals go over TLS too
	if err := l.Err(); err != nil {
		t.Fatalf("auto-renewed lease ended: %v", err)
	}
	if err := l.Release(ctxT(t, 10*time.Second)); err != nil {
		t.Fatalf("Release over TLS: %v", err)
	}
	m := c.NewMutex("tls/mutex")
	if err := m.LockContext(ctxT(t, 10*time.Second)); err != nil {
		t.Fatalf("Mutex.Lock over TLS: %v", err)
	}
	if m.Token() <= l.Token() {
		t.Errorf("mutex token %d is not above the lease's %d", m.Token(), l.Token())
	}
	if ok, err := m.UnlockContext(ctxT(t, 10*time.Second)); !ok || err != nil {
		t.Errorf("Mutex.Unlock = %v, %v", ok, err)
	}

	// The server's name can be given instead of checking the address.
	named := good.Clone()
	named.ServerName = "fencer.test"
	if _, _, err := clientOf(t, []string{addr}, client.WithTLS(named)).Status(ctxT(t, 10*time.Second), "tls/x"); err != nil {
		t.Errorf("Status with ServerName fencer.test: %v", err)
	}
}

// TLS runs over the connections of WithDialer.
func TestTLSOverWithDialer(t *testing.T) {
	t.Parallel()
	ca := testca.New(t, "fencer test CA")
	addr, good := mtlsNode(t, ca)
	var dials atomic.Int32
	d := &net.Dialer{}
	dial := func(ctx context.Context, network, a string) (net.Conn, error) {
		dials.Add(1)
		return d.DialContext(ctx, network, a)
	}
	c := clientOf(t, []string{addr}, client.WithTLS(good), client.WithDialer(dial))
	if _, err := c.TryAcquire(ctxT(t, 10*time.Second), "tls/dialer"); err != nil {
		t.Fatalf("TryAcquire over TLS and WithDialer: %v", err)
	}
	if dials.Load() == 0 {
		t.Error("the dialer of WithDialer was not used")
	}
}

// TLS failures that a retry would meet again fail at once with ErrTLS,
// naming the cause; they are not taken for a node that is down.
func TestTLSRefusedFailsFast(t *testing.T) {
	t.Parallel()
	ca, foreign := testca.New(t, "fencer test CA"), testca.New(t, "fencer test CA")
	addr, _ := mtlsNode(t, ca)
	for _, tc := range []struct {
		name  string
		addr  string
		cfg   *tls.Config
		cause string
	}{
		{"no client certificate", addr, &tls.Config{RootCAs: ca.Pool}, "certificate required"},
		{"client certificate from another CA", addr, &tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{foreign.Issue(t, "node")}}, "tls: "},
		{"server certificate from an unknown CA", addr, &tls.Config{RootCAs: foreign.Pool, Certificates: []tls.Certificate{ca.Issue(t, "node")}}, "unknown authority"},
		{"wrong server name", addr, &tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{ca.Issue(t, "node")}, ServerName: "other.test"}, "other.test"},
		{"server without TLS", addrs[0], &tls.Config{RootCAs: ca.Pool}, "tls: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := clientOf(t, []string{tc.addr}, client.WithTLS(tc.cfg), client.WithFailoverTimeout(10*time.Second))
			start := time.Now()
			_, err := c.TryAcquire(ctxT(t, 20*time.Second), "tls/refused")
			if !errors.Is(err, client.ErrTLS) || !strings.Contains(err.Error(), tc.cause) {
				t.Fatalf("TryAcquire = %v; want ErrTLS naming %q", err, tc.cause)
			}
			if took := time.Since(start); took > time.Second {
				t.Errorf("the refusal took %v; want it well within the failover timeout", took)
			}
		})
	}

	// A client without TLS gets nowhere: the node drops the connection,
	// which looks like a node that is down.
	c := clientOf(t, []string{addr}, client.WithFailoverTimeout(500*time.Millisecond))
	if _, err := c.TryAcquire(ctxT(t, 10*time.Second), "tls/plain"); !errors.Is(err, client.ErrNoLeader) {
		t.Errorf("TryAcquire without TLS = %v; want ErrNoLeader", err)
	}
}

// TLS and authentication together, as a cluster exposed beyond loopback
// runs: the client authenticates inside the TLS connection.
func TestTLSWithAuth(t *testing.T) {
	t.Parallel()
	ca := testca.New(t, "fencer test CA")
	cfg := &tls.Config{RootCAs: ca.Pool}
	addr, _ := secureNode(t, func(c *redisbridge.Config) {
		requireAuth(c)
		c.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, "node")}, MinVersion: tls.VersionTLS12}
	}, client.WithTLS(cfg), client.WithAuth("", testPassword))

	c := clientOf(t, []string{addr}, client.WithTLS(cfg), client.WithAuth(aliceUser, alicePassword))
	l, err := c.TryAcquire(ctxT(t, 10*time.Second), "app:tls")
	if err != nil || l.Token() == 0 {
		t.Fatalf("TryAcquire over TLS as alice = %v, %v", l, err)
	}
	if _, err := c.TryAcquire(ctxT(t, 10*time.Second), "billing"); !errors.Is(err, client.ErrNoPerm) {
		t.Errorf("TryAcquire outside alice's pattern over TLS = %v; want ErrNoPerm", err)
	}
	bad := clientOf(t, []string{addr}, client.WithTLS(cfg), client.WithAuth("", "wrong"))
	if _, err := bad.TryAcquire(ctxT(t, 10*time.Second), "app:tls2"); !errors.Is(err, client.ErrAuth) {
		t.Errorf("TryAcquire over TLS with a wrong password = %v; want ErrAuth", err)
	}
}
