package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"github.com/fencerlock/fencer/client"
	"github.com/spf13/cobra"
)

// security holds how fencer authenticates to the cluster and whether it
// speaks TLS: the flags, completed from the environment.
type security struct {
	user, password            string
	tls                       bool
	caFile, certFile, keyFile string
	serverName                string

	tlsConfig *tls.Config // built by resolve; nil for plain TCP
}

// Environment variables that stand in for --user and --password, so that
// the password need not be on the command line (where ps shows it).
const (
	envUser     = "FENCER_USER"
	envPassword = "FENCER_PASSWORD"
)

// addFlags registers the global authentication and TLS flags on root.
func (s *security) addFlags(root *cobra.Command) {
	f := root.PersistentFlags()
	f.StringVar(&s.user, "user", "", `user to authenticate as, for fencerd --users (default $`+envUser+`; with only a password, the user "default" of fencerd --requirepass)`)
	f.StringVar(&s.password, "password", "", `password to authenticate with (default $`+envPassword+`, which keeps it out of the command line and ps)`)
	f.BoolVar(&s.tls, "tls", false, "connect over TLS (implied by the other --tls-* flags)")
	f.StringVar(&s.caFile, "tls-ca-cert-file", "", "CA certificates (PEM) the nodes' certificates are verified against (default: the system's)")
	f.StringVar(&s.certFile, "tls-cert-file", "", "client certificate (PEM), for a cluster that requires one (fencerd --tls-auth-clients)")
	f.StringVar(&s.keyFile, "tls-key-file", "", "private key (PEM) of --tls-cert-file")
	f.StringVar(&s.serverName, "tls-server-name", "", "name the nodes' certificates must carry (default: the host of each address)")
}

// resolve completes the flags from the environment, checks them and loads
// the TLS files.
func (s *security) resolve(cmd *cobra.Command, getenv func(string) string) error {
	if !cmd.Flags().Changed("user") {
		s.user = getenv(envUser)
	}
	if !cmd.Flags().Changed("password") {
		s.password = getenv(envPassword)
	}
	if s.user != "" && s.password == "" {
		return usage("user %q needs a password: set $%s or --password", s.user, envPassword)
	}
	if (s.certFile == "") != (s.keyFile == "") {
		return usage("--tls-cert-file and --tls-key-file go together")
	}
	if !s.tls && s.caFile == "" && s.certFile == "" && s.serverName == "" {
		return nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: s.serverName}
	if s.caFile != "" {
		pem, err := os.ReadFile(s.caFile)
		if err != nil {
			return fmt.Errorf("--tls-ca-cert-file: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return fmt.Errorf("--tls-ca-cert-file %s: no PEM certificates in it", s.caFile)
		}
	}
	if s.certFile != "" {
		cert, err := tls.LoadX509KeyPair(s.certFile, s.keyFile)
		if err != nil {
			return fmt.Errorf("--tls-cert-file, --tls-key-file: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	s.tlsConfig = cfg
	return nil
}

// options returns the client options for the flags.
func (s *security) options() []client.Option {
	var opts []client.Option
	if s.password != "" {
		opts = append(opts, client.WithAuth(s.user, s.password))
	}
	if s.tlsConfig != nil {
		opts = append(opts, client.WithTLS(s.tlsConfig))
	}
	return opts
}

// hint is a line that may help with err, or "".
func (s *security) hint(err error) string {
	if errors.Is(err, client.ErrAuth) && s.password == "" {
		return fmt.Sprintf("the cluster requires authentication: set $%s (and $%s for a user of fencerd --users), or --password and --user", envPassword, envUser)
	}
	return ""
}
