package main

import (
	"crypto/sha256"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"
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
				reloadCerts(s, logger, "SIGHUP")
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

// watchCertFiles reloads s whenever the contents of its files change,
// looked at every interval, until the returned stop is called: Kubernetes
// updates a mounted Secret in place (it swaps a symlink), and nobody sends
// a SIGHUP. A reload that fails (a certificate written before its key) is
// tried again at the next look. Nothing happens without TLS or with an
// interval of 0.
func watchCertFiles(s *certStore, every time.Duration, logger *slog.Logger) (stop func()) {
	if s == nil || every <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	last := s.fingerprint()
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if fp := s.fingerprint(); fp != last && reloadCerts(s, logger, "files changed") {
					last = fp
				}
			}
		}
	}()
	return func() { close(done) }
}

// fingerprint hashes the contents of s's files (a file that cannot be read
// hashes as its error).
func (s *certStore) fingerprint() [sha256.Size]byte {
	h := sha256.New()
	for _, f := range []string{s.certFile, s.keyFile, s.caFile} {
		if f == "" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			b = []byte(err.Error())
		}
		h.Write([]byte(f))
		h.Write(b)
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// reloadCerts reloads s once, logs the outcome with its cause, and
// reports whether it succeeded.
func reloadCerts(s *certStore, logger *slog.Logger, cause string) bool {
	if s == nil {
		logger.Info(cause + ": no --tls-cert-file, nothing to reload")
		return false
	}
	set, caChanged, err := s.reload()
	if err != nil {
		logger.Error(cause+": TLS reload failed; serving with the certificates in use", "err", err)
		return false
	}
	leaf := set.cert.Leaf
	logger.Info(cause+": reloaded TLS certificates; new connections use them",
		"cert", s.certFile, "subject", leaf.Subject.String(), "not_after", leaf.NotAfter, "ca", s.caFile)
	if caChanged {
		logger.Warn(cause+": the new --tls-ca-cert-file verifies clients and nodes that connect to this node; the nodes this node dials (forwarding, joining, Raft) are verified against the CA read at start until fencerd restarts",
			"ca", s.caFile)
	}
	return true
}
