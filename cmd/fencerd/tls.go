package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// tlsConfigs builds the RESP server's TLS config and the one the node dials
// other nodes with, or nils without --tls-cert-file.
func tlsConfigs(o options) (server, dial *tls.Config, err error) {
	if o.tlsCert == "" && o.tlsKey == "" {
		if o.tlsCA != "" {
			return nil, nil, errors.New("--tls-ca-cert-file needs --tls-cert-file and --tls-key-file")
		}
		return nil, nil, nil
	}
	cert, err := tls.LoadX509KeyPair(o.tlsCert, o.tlsKey)
	if err != nil {
		return nil, nil, fmt.Errorf("--tls-cert-file, --tls-key-file: %w", err)
	}
	server = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	dial = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if o.tlsCA != "" {
		pem, err := os.ReadFile(o.tlsCA)
		if err != nil {
			return nil, nil, fmt.Errorf("--tls-ca-cert-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, fmt.Errorf("--tls-ca-cert-file %s: no PEM certificates", o.tlsCA)
		}
		server.ClientCAs, dial.RootCAs = pool, pool
		if o.tlsAuthClients {
			server.ClientAuth = tls.RequireAndVerifyClientCert
		}
	}
	return server, dial, nil
}

// raftTLSConfig is the Raft transport's mutual TLS config with --raft-tls:
// the node's certificate, and the CA both for peers that dial in and for
// the peers it dials.
func raftTLSConfig(o options, server, dial *tls.Config) (*tls.Config, error) {
	if !o.raftTLS {
		return nil, nil
	}
	if server == nil || o.tlsCA == "" {
		return nil, errors.New("--raft-tls needs --tls-cert-file, --tls-key-file and --tls-ca-cert-file")
	}
	c := server.Clone()
	c.RootCAs, c.ClientAuth = dial.RootCAs, tls.RequireAndVerifyClientCert
	return c, nil
}
