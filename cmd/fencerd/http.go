package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/fencerlock/fencer/server"
)

// listenHTTP opens the --http-listen listener, or returns nil if it is "off".
func listenHTTP(o options) (net.Listener, error) {
	addr := o.httpListen
	switch addr {
	case "off":
		return nil, nil
	case "":
		a, err := addrBeside(o.listen, 2, "--http-listen")
		if err != nil {
			return nil, err
		}
		addr = a
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--http-listen: %w", err)
	}
	return ln, nil
}

// serveHTTP serves the node's /metrics, /healthz and /readyz on ln until the
// returned server is closed. It returns nil if ln is nil.
func serveHTTP(ln net.Listener, node *server.Node, logger *slog.Logger) *http.Server {
	if ln == nil {
		return nil
	}
	srv := &http.Server{Handler: node.HTTPHandler(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("HTTP server stopped", "err", err)
		}
	}()
	logger.Info("serving metrics and health checks", "http", ln.Addr().String())
	return srv
}
