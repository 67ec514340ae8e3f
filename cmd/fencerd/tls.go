package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
)

// certStore holds the node's TLS material, read from the --tls-* files. The
// configs it hands out read the material through callbacks on every
// handshake, so a reload (SIGHUP, see reload.go) reaches every new
// connection without rebuilding the RESP server, the forwarder or the Raft
// transport. Connections already open keep the certificates they were made
// with.
//
// What a reload changes:
//   - connections accepted on the client port and the Raft port: this
//     node's certificate and the CA that client and node certificates are
//     verified against (GetConfigForClient). The Raft port takes only
//     certificates that a node could serve with (nodesOnly);
//   - connections this node dials (forwarding, joining, Raft): the
//     certificate it presents (GetClientCertificate). The CA it verifies the
//     other node against stays the one read at start: Go's TLS stack tells a
//     verification callback the host name it dialed but not the IP address,
//     so a reloadable CA would mean dropping the check that the other node's
//     certificate names the address dialed.
type certStore struct {
	certFile, keyFile, caFile string
	authClients               bool
	// dialRoots verifies the nodes this node dials: the CA read at start,
	// nil (the system's) without --tls-ca-cert-file.
	dialRoots *x509.CertPool
	cur       atomic.Pointer[certSet]
}

// certSet is one reading of the files. It is not changed once stored.
type certSet struct {
	cert  *tls.Certificate
	caPEM []byte         // nil without --tls-ca-cert-file
	pool  *x509.CertPool // from caPEM
	// client and raft are the configs of handshakes accepted on the client
	// port and on the Raft port.
	client, raft *tls.Config
}

// loadCertStore reads the --tls-* files, or returns nil without
// --tls-cert-file and --tls-key-file.
func loadCertStore(f tlsFlags) (*certStore, error) {
	if f.cert == "" && f.key == "" {
		if f.ca != "" {
			return nil, errors.New("--tls-ca-cert-file needs --tls-cert-file and --tls-key-file")
		}
		return nil, nil
	}
	s := &certStore{certFile: f.cert, keyFile: f.key, caFile: f.ca, authClients: f.authClients}
	set, err := s.read()
	if err != nil {
		return nil, err
	}
	s.dialRoots = set.pool
	s.cur.Store(set)
	return s, nil
}

// read reads the files into a new certSet.
func (s *certStore) read() (*certSet, error) {
	cert, err := tls.LoadX509KeyPair(s.certFile, s.keyFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert-file, --tls-key-file: %w", err)
	}
	if cert.Leaf == nil { // GODEBUG=x509keypairleaf=0
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("--tls-cert-file: %w", err)
		}
	}
	set := &certSet{cert: &cert}
	set.client = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	set.raft = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12,
		ClientAuth: tls.RequireAndVerifyClientCert}
	if s.caFile != "" {
		pem, err := os.ReadFile(s.caFile)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca-cert-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca-cert-file %s: no PEM certificates", s.caFile)
		}
		set.caPEM, set.pool = pem, pool
		set.client.ClientCAs, set.raft.ClientCAs = pool, pool
		set.raft.VerifyConnection = nodesOnly(pool)
		if s.authClients {
			set.client.ClientAuth = tls.RequireAndVerifyClientCert
		}
	}
	return set, nil
}

// nodesOnly is the Raft port's VerifyConnection: the peer's certificate
// must be usable by a server, as every node's is (other nodes verify it when
// they dial this one). The CA may also sign clients' certificates for
// --tls-auth-clients; those must not speak Raft.
func nodesOnly(pool *x509.CertPool) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("raft: no certificate from the peer")
		}
		opts := x509.VerifyOptions{Roots: pool, Intermediates: x509.NewCertPool(),
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
		for _, c := range cs.PeerCertificates[1:] {
			opts.Intermediates.AddCert(c)
		}
		if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
			return fmt.Errorf("raft: the peer's certificate is not a node's (no serverAuth): %w", err)
		}
		return nil
	}
}

// reload reads the files again and, if they are good, serves new
// connections with them. On an error the certificates in use stay. It
// reports whether the CA file's contents changed.
func (s *certStore) reload() (set *certSet, caChanged bool, err error) {
	set, err = s.read()
	if err != nil {
		return nil, false, err
	}
	old := s.cur.Swap(set)
	return set, !bytes.Equal(old.caPEM, set.caPEM), nil
}

// certificate is GetClientCertificate: the node's current certificate.
func (s *certStore) certificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return s.cur.Load().cert, nil
}

// serverConfig is the client port's config, or nil without TLS.
func (s *certStore) serverConfig() *tls.Config {
	if s == nil {
		return nil
	}
	return &tls.Config{MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return s.cur.Load().client, nil }}
}

// dialConfig is the config the node forwards and joins with, or nil
// without TLS.
func (s *certStore) dialConfig() *tls.Config {
	if s == nil {
		return nil
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: s.dialRoots, GetClientCertificate: s.certificate}
}

// raftTLSConfig is the Raft transport's mutual TLS config with --raft-tls,
// used both to accept and to dial: the node's certificate, and the CA both
// for peers that dial in and for the peers it dials.
func raftTLSConfig(f tlsFlags, s *certStore) (*tls.Config, error) {
	if !f.raft {
		return nil, nil
	}
	if s == nil || s.caFile == "" {
		return nil, errors.New("--raft-tls needs --tls-cert-file, --tls-key-file and --tls-ca-cert-file")
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, ClientAuth: tls.RequireAndVerifyClientCert,
		RootCAs: s.dialRoots, GetClientCertificate: s.certificate,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return s.cur.Load().raft, nil }}, nil
}
