package server

import (
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// HTTPHandler serves the node's operational endpoints:
//
//   - /metrics: Prometheus series named fencer_... (and Go's process series);
//   - /healthz: liveness: 200 while the node's own loops run (Live), 503
//     with the reason when one is stuck; it never depends on a leader or a
//     quorum, so that a cluster that lost its quorum is not restarted;
//   - /readyz: 200 when this node can serve requests: a leader is known and
//     its client address too (so a follower can forward), and if this node
//     is that leader, it has applied its log and restarted every lease.
//     Otherwise 503 with the reason.
func (n *Node) HTTPHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(n.metrics.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if err := n.Live(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
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

// livenessWait is how long Live waits for the expiry loop to answer: well
// under the second a Kubernetes probe waits by default.
const livenessWait = 500 * time.Millisecond

// defaultStuckAfter is how long one apply may run before Live calls the
// applier stuck: a batch of commands applies in milliseconds.
const defaultStuckAfter = 30 * time.Second

// Live returns nil if the node's own loops run: no apply of committed
// entries has been running for longer than stuckAfter, and the expiry loop
// goes round (taking the grants' lock the applier also takes) within
// livenessWait. It asks nothing of the cluster: a node without a leader or
// a quorum is live.
func (n *Node) Live() error {
	if since := n.fsm.applyingSince(); since > 0 {
		if d := time.Since(time.Unix(0, since)); d > n.stuckAfter {
			return fmt.Errorf("server: not live: applying committed entries has not returned for %v", d.Round(time.Millisecond))
		}
	}
	reply := make(chan struct{})
	timer := time.NewTimer(livenessWait)
	defer timer.Stop()
	select {
	case n.probe <- reply:
	case <-n.stopCh:
		return fmt.Errorf("server: not live: %w", ErrShutdown)
	case <-timer.C:
		return fmt.Errorf("server: not live: the expiry loop did not answer within %v", livenessWait)
	}
	select {
	case <-reply:
		return nil
	case <-n.stopCh:
		return fmt.Errorf("server: not live: %w", ErrShutdown)
	case <-timer.C:
		return fmt.Errorf("server: not live: the expiry loop did not answer within %v", livenessWait)
	}
}
