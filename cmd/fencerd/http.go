package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/fencerlock/fencer/server"
)

// listenHTTP opens the --http-listen listener (addr; listen is --listen),
// or returns nil if it is "off".
// An address set explicitly that cannot be bound is an error. The derived
// default (--listen port + 2) is only a convenience: if it cannot be derived
// (--listen port 0) or bound (a test harness picked that port for something
// else), fencerd logs a warning and runs without HTTP rather than not at all.
func listenHTTP(addr, listen string, logger *slog.Logger) (net.Listener, error) {
	switch addr {
	case "off":
		return nil, nil
	case "":
		a, err := addrBeside(listen, 2, "--http-listen")
		if err != nil {
			logger.Warn("no metrics or health endpoints", "err", err)
			return nil, nil
		}
		ln, err := net.Listen("tcp", a)
		if err != nil {
			logger.Warn("no metrics or health endpoints: the default --http-listen address is unavailable; set --http-listen", "addr", a, "err", err)
			return nil, nil
		}
		return ln, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--http-listen: %w", err)
	}
	return ln, nil
}

// serveHTTP serves the node's /metrics, /healthz and /readyz on ln until the
// returned server is closed. It returns nil if ln is nil.
// With withPprof it also serves Go's profiles under /debug/pprof/.
func serveHTTP(ln net.Listener, node *server.Node, logger *slog.Logger, withPprof bool) *http.Server {
	if ln == nil {
		return nil
	}
	handler := node.HTTPHandler()
	if withPprof {
		mux := http.NewServeMux()
		mux.Handle("/", handler)
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		handler = mux
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("HTTP server stopped", "err", err)
		}
	}()
	logger.Info("serving metrics and health checks", "http", ln.Addr().String())
	return srv
}
