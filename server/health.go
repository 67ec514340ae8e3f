package server

import (
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// HTTPHandler serves the node's operational endpoints:
//
//   - /metrics: Prometheus series named fencer_... (and Go's process series);
//   - /healthz: 200 while the process serves HTTP;
//   - /readyz: 200 when this node can serve requests: a leader is known and
//     its client address too (so a follower can forward), and if this node
//     is that leader, it has applied its log and restarted every lease.
//     Otherwise 503 with the reason.
func (n *Node) HTTPHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(n.metrics.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := n.Ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	return mux
}

// Ready returns nil if the node can serve requests now (see HTTPHandler's
// /readyz), or an error giving the reason it cannot.
func (n *Node) Ready() error {
	ready, closed, _ := n.grants.state()
	if closed {
		return fmt.Errorf("%w: %w", ErrNotReady, ErrShutdown)
	}
	lid, addr := n.Leader()
	switch {
	case lid == "" && !n.isMember():
		return fmt.Errorf("%w: not a member of a cluster", ErrNotReady)
	case lid == "":
		return fmt.Errorf("%w: no leader known", ErrNotReady)
	case lid == n.id && !ready:
		return fmt.Errorf("%w: leader still applying its log", ErrNotReady)
	case addr == "":
		return fmt.Errorf("%w: leader %s has no client address yet", ErrNotReady, lid)
	}
	return nil
}
