package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fencerlock/fencer/internal/testca"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tlsFiles are the three --tls-* files of a test.
type tlsFiles struct{ cert, key, ca string }

func newTLSFiles(t *testing.T) tlsFiles {
	dir := t.TempDir()
	return tlsFiles{cert: filepath.Join(dir, "node.pem"), key: filepath.Join(dir, "node-key.pem"), ca: filepath.Join(dir, "ca.PEM")}
}

// install writes a certificate from ca for "node" and ca's certificate.
func (f tlsFiles) install(t *testing.T, ca *testca.CA) {
	t.Helper()
	c, k := ca.IssuePEM(t, "node")
	require.NoError(t, os.WriteFile(f.cert, c, 0o600))
	require.NoError(t, os.WriteFile(f.key, k, 0o600))
	require.NoError(t, os.WriteFile(f.ca, ca.PEM, 0o600))
}

// serveTLS accepts connections on loopback with cfg; each one that
// completes its handshake is answered "ok" and closed.
func serveTLS(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	require.NoError(t, err)
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			if c.(*tls.Conn).Handshake() == nil {
				_, _ = c.Write([]byte("ok"))
			}
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

// handshake dials addr with cfg and reports whether the server accepted
// it, and the certificate it presented.
func handshake(addr string, cfg *tls.Config) (*x509.Certificate, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	// With TLS 1.3 a refused client certificate shows on the first read.
	b, err := io.ReadAll(c)
	if err != nil {
		return nil, err
	}
	if string(b) != "ok" {
		return nil, io.ErrUnexpectedEOF
	}
	return c.ConnectionState().PeerCertificates[0], nil
}

// A reload serves new connections with the new certificate, key and CA; a
// reload of bad files keeps the old ones.
func TestReloadClientPort(t *testing.T) {
	oldCA, newCA := testca.New(t, "old CA"), testca.New(t, "new CA")
	files := newTLSFiles(t)
	files.install(t, oldCA)
	s, err := loadCertStore(tlsFlags{cert: files.cert, key: files.key, ca: files.ca, authClients: true})
	require.NoError(t, err)
	addr := serveTLS(t, s.serverConfig())

	oldClient := &tls.Config{RootCAs: oldCA.Pool, Certificates: []tls.Certificate{oldCA.Issue(t, "client")}}
	newClient := &tls.Config{RootCAs: newCA.Pool, Certificates: []tls.Certificate{newCA.Issue(t, "client")}}
	peer, err := handshake(addr, oldClient)
	require.NoError(t, err)
	assert.Equal(t, "old CA", peer.Issuer.CommonName)
	_, err = handshake(addr, newClient)
	assert.Error(t, err, "before the reload, a client trusting only the new CA is refused")

	files.install(t, newCA)
	_, caChanged, err := s.reload()
	require.NoError(t, err)
	assert.True(t, caChanged)
	peer, err = handshake(addr, newClient)
	require.NoError(t, err, "after the reload")
	assert.Equal(t, "new CA", peer.Issuer.CommonName)
	_, err = handshake(addr, oldClient)
	assert.Error(t, err, "a client of the old CA is refused after the reload")
	_, err = handshake(addr, &tls.Config{RootCAs: newCA.Pool})
	assert.Error(t, err, "a client without a certificate is refused")
	_, err = handshake(addr, &tls.Config{RootCAs: newCA.Pool, Certificates: []tls.Certificate{newCA.IssueClient(t, "app")}})
	assert.NoError(t, err, "the client port takes a client-only certificate")

	// A half-written key: the reload fails, the new CA's certificate stays.
	require.NoError(t, os.WriteFile(files.key, []byte("-----BEGIN PRIVATE KEY-----\ngarbage\n"), 0o600))
	_, _, err = s.reload()
	assert.ErrorContains(t, err, "--tls-cert-file")
	// A CA file without certificates: the reload fails too.
	files.install(t, newCA)
	require.NoError(t, os.WriteFile(files.ca, []byte("not PEM"), 0o600))
	_, _, err = s.reload()
	assert.ErrorContains(t, err, "--tls-ca-cert-file")
	peer, err = handshake(addr, newClient)
	require.NoError(t, err, "after failed reloads")
	assert.Equal(t, "new CA", peer.Issuer.CommonName)
}

// The Raft config takes the reloaded certificate and CA for connections it
// accepts, always requires a client certificate, presents the reloaded
// certificate when it dials, and verifies the nodes it dials against the CA
// read at start.
func TestReloadRaft(t *testing.T) {
	oldCA, newCA := testca.New(t, "old CA"), testca.New(t, "new CA")
	files := newTLSFiles(t)
	files.install(t, oldCA)
	o := tlsFlags{cert: files.cert, key: files.key, ca: files.ca, authClients: false, raft: true}
	s, err := loadCertStore(o)
	require.NoError(t, err)
	raftCfg, err := raftTLSConfig(o, s)
	require.NoError(t, err)
	addr := serveTLS(t, raftCfg)
	_, err = handshake(addr, &tls.Config{RootCAs: oldCA.Pool})
	assert.Error(t, err, "Raft needs a client certificate even with --tls-auth-clients=false")
	_, err = handshake(addr, &tls.Config{RootCAs: oldCA.Pool, Certificates: []tls.Certificate{oldCA.Issue(t, "peer")}})
	require.NoError(t, err)
	_, err = handshake(addr, &tls.Config{RootCAs: oldCA.Pool, Certificates: []tls.Certificate{oldCA.IssueClient(t, "app")}})
	assert.Error(t, err, "a client's certificate (clientAuth only) from the same CA does not get into Raft")

	// This node dials a peer that requires a certificate from either CA.
	both := x509.NewCertPool()
	both.AddCert(oldCA.Cert)
	both.AddCert(newCA.Cert)
	peerOld := serveTLS(t, &tls.Config{Certificates: []tls.Certificate{oldCA.Issue(t, "peer")}, ClientCAs: both,
		ClientAuth: tls.RequireAndVerifyClientCert})
	peerNew := serveTLS(t, &tls.Config{Certificates: []tls.Certificate{newCA.Issue(t, "peer")}, ClientCAs: both,
		ClientAuth: tls.RequireAndVerifyClientCert})
	_, err = handshake(peerOld, raftCfg)
	require.NoError(t, err)

	files.install(t, newCA)
	_, _, err = s.reload()
	require.NoError(t, err)
	_, err = handshake(addr, &tls.Config{RootCAs: oldCA.Pool, Certificates: []tls.Certificate{oldCA.Issue(t, "peer")}})
	assert.Error(t, err, "a peer of the old CA is refused after the reload")
	peer, err := handshake(addr, &tls.Config{RootCAs: newCA.Pool, Certificates: []tls.Certificate{newCA.Issue(t, "peer")}})
	require.NoError(t, err)
	assert.Equal(t, "new CA", peer.Issuer.CommonName)

	cert, err := raftCfg.GetClientCertificate(&tls.CertificateRequestInfo{})
	require.NoError(t, err)
	assert.Equal(t, "new CA", cert.Leaf.Issuer.CommonName, "dialing presents the reloaded certificate")
	_, err = handshake(peerOld, raftCfg)
	assert.NoError(t, err, "a peer of the CA read at start is still verified")
	_, err = handshake(peerNew, raftCfg)
	assert.Error(t, err, "dialing verifies against the CA read at start")
}

// A SIGHUP reloads and logs the outcome; without TLS it is logged and
// ignored (it does not end the process).
func TestSIGHUP(t *testing.T) {
	ca := testca.New(t, "CA")
	files := newTLSFiles(t)
	files.install(t, ca)
	s, err := loadCertStore(tlsFlags{cert: files.cert, key: files.key})
	require.NoError(t, err)
	var mu sync.Mutex
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, nil))
	logged := func(want string) bool {
		mu.Lock()
		defer mu.Unlock()
		return bytes.Contains(buf.Bytes(), []byte(want))
	}

	stop := reloadOnSIGHUP(s, logger)
	defer stop()
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	require.Eventually(t, func() bool { return logged("reloaded TLS certificates") }, 5*time.Second, 10*time.Millisecond)
	assert.True(t, logged("CN=node"), "the log names the certificate")
	require.NoError(t, os.WriteFile(files.cert, nil, 0o600))
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	require.Eventually(t, func() bool { return logged("TLS reload failed") }, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, "node", s.cur.Load().cert.Leaf.Subject.CommonName, "the old certificate stays")

	reloadCerts(nil, logger, "SIGHUP")
	assert.True(t, logged("nothing to reload"))
}

// Changed files are reloaded without a signal (a Kubernetes Secret updated
// in place); a broken pair is retried until it is good.
func TestWatchCertFiles(t *testing.T) {
	files := newTLSFiles(t)
	files.install(t, testca.New(t, "CA"))
	s, err := loadCertStore(tlsFlags{cert: files.cert, key: files.key})
	require.NoError(t, err)
	var mu sync.Mutex
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, nil))
	logged := func(want string) bool {
		mu.Lock()
		defer mu.Unlock()
		return bytes.Contains(buf.Bytes(), []byte(want))
	}
	stop := watchCertFiles(s, 10*time.Millisecond, logger)
	defer stop()
	time.Sleep(50 * time.Millisecond)
	assert.False(t, logged("reloaded"), "unchanged files are not reloaded")

	require.NoError(t, os.WriteFile(files.cert, nil, 0o600))
	require.Eventually(t, func() bool { return logged("files changed: TLS reload failed") }, 5*time.Second, 10*time.Millisecond)
	files.install(t, testca.New(t, "new CA"))
	require.Eventually(t, func() bool { return s.cur.Load().cert.Leaf.Issuer.CommonName == "new CA" }, 5*time.Second, 10*time.Millisecond)
	assert.True(t, logged("files changed: reloaded TLS certificates"))
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
