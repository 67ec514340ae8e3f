package server

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fencerlock/fencer/internal/version"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scrape fetches path from h and returns the status and body.
func scrape(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

// sample returns the value of the series line that starts with series (name
// and labels exactly as exposed), or -1 if there is none.
func sample(t *testing.T, body, series string) float64 {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`)
	m := re.FindStringSubmatch(body)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	return v
}

func TestMetricsMoveAfterRequests(t *testing.T) {
	n := openNode(t, t.TempDir())
	h := n.HTTPHandler()
	code, body := scrape(t, h, "/metrics")
	require.Equal(t, http.StatusOK, code)
	for _, s := range []string{
		`fencer_raft_state{state="leader"}`, `fencer_raft_state{state="follower"}`,
		`fencer_raft_state{state="candidate"}`, `fencer_locks_held`, `fencer_waiters`,
		`fencer_expiries_total`, `fencer_ready`, `fencer_request_duration_seconds_count{op="acquire"}`,
		`fencer_log_store_write_seconds_count`, `fencer_leader_changes_total`,
	} {
		assert.GreaterOrEqual(t, sample(t, body, s), 0.0, "series %s missing", s)
	}
	assert.Equal(t, 1.0, sample(t, body, `fencer_raft_state{state="leader"}`))
	assert.Equal(t, 0.0, sample(t, body, `fencer_raft_state{state="follower"}`))
	assert.Equal(t, 1.0, sample(t, body, `fencer_ready`))
	assert.Equal(t, 1.0, sample(t, body, `fencer_format_in_use`), "a cluster of one is at format level 1")
	assert.GreaterOrEqual(t, sample(t, body, `fencer_leader_changes_total`), 1.0)
	assert.Equal(t, 0.0, sample(t, body, `fencer_locks_held`))
	assert.Equal(t, 0.0, sample(t, body, `fencer_request_duration_seconds_count{op="acquire"}`))
	writes := sample(t, body, `fencer_log_store_write_seconds_count`)
	entries := sample(t, body, `fencer_log_entries`)
	assert.GreaterOrEqual(t, entries, 1.0, "a new node's log holds its bootstrap configuration")

	ctx := ctxT(t)
	mustAcquire(t, n, "a", "me", 10*time.Second)
	mustAcquire(t, n, "short", "me", 200*time.Millisecond)
	_, ok, err := n.Acquire(ctx, "a", "you", 10*time.Second, 0)
	require.NoError(t, err)
	require.False(t, ok)
	ok, err = n.Extend(ctx, "a", "you", time.Second)
	require.NoError(t, err)
	require.False(t, ok)
	ok, err = n.Extend(ctx, "a", "me", 10*time.Second)
	require.NoError(t, err)
	require.True(t, ok)

	_, body = scrape(t, h, "/metrics")
	assert.Equal(t, 2.0, sample(t, body, `fencer_requests_total{op="acquire",outcome="granted"}`))
	assert.Equal(t, 1.0, sample(t, body, `fencer_requests_total{op="acquire",outcome="not_granted"}`))
	assert.Equal(t, 1.0, sample(t, body, `fencer_requests_total{op="extend",outcome="not_holder"}`))
	assert.Equal(t, 1.0, sample(t, body, `fencer_requests_total{op="extend",outcome="extended"}`))
	assert.Equal(t, 3.0, sample(t, body, `fencer_request_duration_seconds_count{op="acquire"}`))
	assert.Greater(t, sample(t, body, `fencer_log_store_write_seconds_count`), writes)
	assert.Greater(t, sample(t, body, `fencer_log_entries`), entries)
	assert.Equal(t, 2.0, sample(t, body, `fencer_locks_held`))

	// The 200ms lease expires on the leader; the series say so.
	require.Eventually(t, func() bool {
		_, body := scrape(t, h, "/metrics")
		return sample(t, body, `fencer_expiries_total`) == 1 && sample(t, body, `fencer_locks_held`) == 1
	}, 10*time.Second, 20*time.Millisecond)

	ok, err = n.Release(ctx, "a", "me")
	require.NoError(t, err)
	require.True(t, ok)
	_, body = scrape(t, h, "/metrics")
	assert.Equal(t, 1.0, sample(t, body, `fencer_requests_total{op="release",outcome="released"}`))
	assert.Equal(t, 0.0, sample(t, body, `fencer_locks_held`))
}

func TestReadyzBeforeAndAfterElection(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.RaftAddr = "127.0.0.1:0"
	cfg.RaftLogLevel = "error"
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	n, err := Open(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Close() })
	h := n.HTTPHandler()

	// Raft waits at least its heartbeat timeout (1s) before its first
	// election, so right after Open no leader is known.
	code, body := scrape(t, h, "/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "no leader known")
	code, _ = scrape(t, h, "/healthz")
	assert.Equal(t, http.StatusOK, code)

	require.Eventually(t, func() bool {
		code, _ := scrape(t, h, "/readyz")
		return code == http.StatusOK
	}, 10*time.Second, 20*time.Millisecond)
	require.NoError(t, n.Ready())

	require.NoError(t, n.Close())
	code, body = scrape(t, h, "/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "shutting down")
}

func TestReadyzOfNodeWaitingToJoin(t *testing.T) {
	n, err := Open(func() Config {
		cfg := DefaultConfig()
		cfg.DataDir = t.TempDir()
		cfg.RaftAddr = "127.0.0.1:0"
		cfg.Join = true
		cfg.RaftLogLevel = "error"
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		return cfg
	}())
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Close() })
	// Past two election timeouts a lone node waiting to join still has no
	// leader: it is never ready.
	time.Sleep(2 * time.Second)
	code, body := scrape(t, n.HTTPHandler(), "/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.True(t, strings.Contains(body, "not a member"), body)
}

func TestMetricsLeaveForwardedRequestsToTheLeader(t *testing.T) {
	c := newCluster(t, 2)
	leader := c.leader()
	follower := c.nodes[1-c.index(leader)]
	_, _, err := follower.Acquire(ctxT(t), "f", "me", time.Minute, 0)
	var nl *NotLeaderError
	require.ErrorAs(t, err, &nl)
	mustAcquire(t, leader, "f", "me", time.Minute)

	_, body := scrape(t, follower.HTTPHandler(), "/metrics")
	assert.Equal(t, 0.0, sample(t, body, `fencer_request_duration_seconds_count{op="acquire"}`))
	assert.Equal(t, 1.0, sample(t, body, `fencer_raft_state{state="follower"}`))
	_, body = scrape(t, leader.HTTPHandler(), "/metrics")
	assert.Equal(t, 1.0, sample(t, body, `fencer_requests_total{op="acquire",outcome="granted"}`))
	require.NoError(t, follower.Ready())
	code, _ := scrape(t, follower.HTTPHandler(), "/readyz")
	assert.Equal(t, http.StatusOK, code)
}

// fencer_build_info is 1 with the running binary's version in its labels.
func TestBuildInfoSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(buildInfo())
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	v := version.Get()
	series := fmt.Sprintf(`fencer_build_info{commit_time=%q,goversion=%q,modified=%q,revision=%q,version=%q}`,
		v.Time, v.GoVersion, strconv.FormatBool(v.Modified), v.Revision, version.Version)
	assert.Equal(t, 1.0, sample(t, rec.Body.String(), series), "%s in\n%s", series, rec.Body.String())
}
