package main

import (
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// reloadOnSIGHUP reloads the TLS certificates on every SIGHUP until the
// returned stop is called. A reload that fails (a missing or bad file, a
// key that does not match its certificate) is logged and the node keeps
// serving with the certificates it has. Without TLS a SIGHUP is logged and
// ignored rather than ending the process (Go's default for SIGHUP).
func reloadOnSIGHUP(s *certStore, logger *slog.Logger) (stop func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-sigs:
				reloadCerts(s, logger)
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(sigs)
		close(done)
	}
}

// reloadCerts reloads s once and logs the outcome.
func reloadCerts(s *certStore, logger *slog.Logger) {
	if s == nil {
		logger.Info("SIGHUP: no --tls-cert-file, nothing to reload")
		return
	}
	set, caChanged, err := s.reload()
	if err != nil {
		logger.Error("SIGHUP: TLS reload failed; serving with the certificates in use", "err", err)
		return
	}
	leaf := set.cert.Leaf
	logger.Info("SIGHUP: reloaded TLS certificates; new connections use them",
		"cert", s.certFile, "subject", leaf.Subject.String(), "not_after", leaf.NotAfter, "ca", s.caFile)
	if caChanged {
		logger.Warn("SIGHUP: the new --tls-ca-cert-file verifies clients and nodes that connect to this node; the nodes this node dials (forwarding, joining, Raft) are verified against the CA read at start until fencerd restarts",
			"ca", s.caFile)
	}
}
