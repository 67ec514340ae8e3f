package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync/atomic"
	"time"
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

// endpoints is the HTTP handler fencerd serves from before its node opens:
// until then (a node that is to join may wait long for its seed) /healthz
// answers, as the process is running, and /readyz and /metrics say the node
// is starting; then the node's own handler (server.Node.HTTPHandler).
type endpoints struct {
	node atomic.Pointer[http.Handler]
}

// opened switches to the node's handler.
func (e *endpoints) opened(h http.Handler) { e.node.Store(&h) }

func (e *endpoints) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := e.node.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	switch r.URL.Path {
	case "/healthz":
		fmt.Fprintln(w, "ok")
	case "/readyz", "/metrics":
		http.Error(w, "server: not ready: starting (waiting for the cluster to answer, or restoring)", http.StatusServiceUnavailable)
	default:
		http.NotFound(w, r)
	}
}

// serveHTTP serves e's /metrics, /healthz and /readyz on ln until the
// returned server is closed. It returns nil if ln is nil.
// With withPprof it also serves Go's profiles under /debug/pprof/.
func serveHTTP(ln net.Listener, e *endpoints, logger *slog.Logger, withPprof bool) *http.Server {
	if ln == nil {
		return nil
	}
	var handler http.Handler = e
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
