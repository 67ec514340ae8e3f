package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fencerlock/fencer/fsm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, strings.TrimSpace(rec.Body.String())
}

// Liveness fails when the node's own loops are stuck, here the grants'
// lock, which the applier and the expiry loop take, held as a deadlock
// would hold it (a fault no real part produces on demand), and answers
// again once it is free. It never asks for a leader.
func TestHealthzFailsWhenLoopsAreStuck(t *testing.T) {
	n := openNode(t, t.TempDir())
	h := n.HTTPHandler()
	code, body := get(t, h, "/healthz")
	require.Equal(t, http.StatusOK, code, body)

	n.grants.mu.Lock()
	start := time.Now()
	code, body = get(t, h, "/healthz")
	took := time.Since(start)
	n.grants.mu.Unlock()
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "expiry loop")
	assert.Less(t, took, 2*livenessWait+time.Second, "answered within the probe's wait")

	code, body = get(t, h, "/healthz")
	assert.Equal(t, http.StatusOK, code, body)
}

// An apply that does not return (here: blocked on the grants' lock, held
// as a deadlock would hold it) fails liveness once it has run for
// stuckAfter.
func TestHealthzFailsWhenApplyingStops(t *testing.T) {
	n := openNode(t, t.TempDir())
	n.stuckAfter = 300 * time.Millisecond
	h := n.HTTPHandler()
	n.grants.mu.Lock()
	locked := true
	defer func() {
		if locked {
			n.grants.mu.Unlock()
		}
	}()
	c := fsm.Command{Op: fsm.OpAcquire, Key: "k", Owner: "o", TTL: 60000}
	go func() { _ = n.raft.Apply(c.Encode(nil), 0).Error() }()
	require.Eventually(t, func() bool { return n.fsm.applyingSince() > 0 }, 5*time.Second, 5*time.Millisecond)
	time.Sleep(400 * time.Millisecond)
	code, body := get(t, h, "/healthz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "applying")
	n.grants.mu.Unlock()
	locked = false
	require.Eventually(t, func() bool { c, _ := get(t, h, "/healthz"); return c == http.StatusOK }, 5*time.Second, 10*time.Millisecond)
}
