package server

import (
	"errors"
	"strconv"
	"time"

	"github.com/fencerlock/fencer/fsm"
	"github.com/fencerlock/fencer/internal/version"
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics holds a node's Prometheus series. Each node has its own registry,
// so several nodes in one process (tests) do not collide.
type metrics struct {
	reg *prometheus.Registry
	// requests counts acquire, extend and release requests served on this
	// node by outcome; latency times them, from the call to the answer.
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	// expiries counts Expire entries that freed a lease, as applied here.
	expiries prometheus.Counter
	// leaderChanges counts leader changes this node observed.
	leaderChanges prometheus.Counter
	// fsync times the log store's writes of new entries: each batch is
	// fsynced, so this is the disk's sync latency plus the store's own
	// work.
	fsync prometheus.Histogram
	// ops are the series of each op, resolved once: observe runs on every
	// request.
	ops map[string]*opSeries
}

// opSeries are one op's request counters by outcome and its latency.
type opSeries struct {
	ok, notOK, failed prometheus.Counter
	latency           prometheus.Observer
}

// opOutcomes names each op's outcomes: served with a yes, with a no.
var opOutcomes = map[string][2]string{
	"acquire": {"granted", "not_granted"},
	"extend":  {"extended", "not_holder"},
	"release": {"released", "not_holder"},
	// Sessions: opened; kept alive or gone; closed (revoked) or not open.
	"session-open":      {"opened", "not_opened"},
	"session-keepalive": {"alive", "no_session"},
	"session-close":     {"closed", "no_session"},
	"session-revoke":    {"revoked", "no_session"},
}

// raftStates are the states reported by fencer_raft_state.
var raftStates = []raft.RaftState{raft.Follower, raft.Candidate, raft.Leader, raft.Shutdown}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencer_requests_total",
			Help: "Acquire, extend, release and session requests served by this node, by op and outcome (granted/not_granted, extended/not_holder, released/not_holder, opened, alive/no_session, closed/no_session, revoked/no_session, error).",
		}, []string{"op", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "fencer_request_duration_seconds",
			Help:    "Latency of acquire (including any WAIT in the queue), extend and release requests served by this node, by op.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"op"}),
		expiries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fencer_expiries_total",
			Help: "Leases freed by expiry, as applied by this node.",
		}),
		leaderChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fencer_leader_changes_total",
			Help: "Leader changes observed by this node (including to no leader).",
		}),
		fsync: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "fencer_log_store_write_seconds",
			Help:    "Time to write and fsync a batch of Raft log entries to the log store.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		}),
	}
	m.reg.MustRegister(m.requests, m.latency, m.expiries, m.leaderChanges, m.fsync, buildInfo(),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.ops = make(map[string]*opSeries, len(opOutcomes))
	for op, out := range opOutcomes {
		m.ops[op] = &opSeries{
			ok:      m.requests.WithLabelValues(op, out[0]),
			notOK:   m.requests.WithLabelValues(op, out[1]),
			failed:  m.requests.WithLabelValues(op, "error"),
			latency: m.latency.WithLabelValues(op),
		}
	}
	return m
}

// buildInfo is fencer_build_info: always 1, its labels say what the node
// runs, so that a query can join them to any other series (as Prometheus's
// own prometheus_build_info).
func buildInfo() prometheus.Collector {
	v := version.Get()
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fencer_build_info",
		Help: "Always 1; the labels are the fencer version this node runs, its commit, the commit's time and the Go version that built it.",
		ConstLabels: prometheus.Labels{"version": v.Version, "revision": v.Revision, "commit_time": v.Time,
			"modified": strconv.FormatBool(v.Modified), "goversion": v.GoVersion},
	}, func() float64 { return 1 })
}

// registerNodeGauges adds the series read from the node when scraped.
func (n *Node) registerNodeGauges() {
	m := n.metrics
	m.reg.MustRegister(newClusterInfo(n), newMemberHealthCollector(n), newExpiryBacklog(n))
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fencer_format_in_use",
		Help: "The cluster's format level as this node applied it (docs/compatibility.md); the leader raises it once every member reads the next.",
	}, func() float64 { return float64(n.table.Format()) }))
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fencer_locks_held",
		Help: "Locks held in this node's table.",
	}, func() float64 { return float64(n.table.Len()) }))
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fencer_waiters",
		Help: "Acquires queued (WAIT) on this node for a lock.",
	}, func() float64 { return float64(n.grants.waiting()) }))
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fencer_ready",
		Help: "1 if this node is a leader that has applied its log and restarted every lease.",
	}, func() float64 {
		if ready, _, _ := n.grants.state(); ready {
			return 1
		}
		return 0
	}))
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "fencer_proposed_entries_total",
		Help: "Raft entries this node proposed (as leader); with fencer_proposed_commands_total, the group commit's commands per entry.",
	}, func() float64 { e, _ := n.batch.stats(); return float64(e) }))
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "fencer_proposed_commands_total",
		Help: "Commands this node proposed (as leader), in fencer_proposed_entries_total entries.",
	}, func() float64 { _, c := n.batch.stats(); return float64(c) }))
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fencer_log_entries",
		Help: "Raft log entries kept in this node's log store: those since the last snapshot, and the trailing ones kept behind it (--raft-trailing-logs).",
	}, func() float64 {
		first, err1 := n.store.FirstIndex()
		last, err2 := n.store.LastIndex()
		if err1 != nil || err2 != nil || last < first || last == 0 {
			return 0
		}
		return float64(last - first + 1)
	}))
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fencer_applied_index",
		Help: "Raft index of the last entry applied by this node.",
	}, func() float64 { return float64(n.raft.AppliedIndex()) }))
	for _, s := range raftStates {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "fencer_raft_state",
			Help:        "1 for this node's current Raft state, 0 for the others.",
			ConstLabels: prometheus.Labels{"state": stateName(s)},
		}, func() float64 {
			if n.raft.State() == s {
				return 1
			}
			return 0
		}))
	}
}

func stateName(s raft.RaftState) string {
	switch s {
	case raft.Follower:
		return "follower"
	case raft.Candidate:
		return "candidate"
	case raft.Leader:
		return "leader"
	default:
		return "shutdown"
	}
}

// observe records a request's outcome and latency. A request this node is
// not the leader for is not counted here: the bridge forwards it, and the
// leader counts it.
func (m *metrics) observe(op string, start time.Time, ok bool, err error) {
	if errors.Is(err, ErrNotLeader) {
		return
	}
	s := m.ops[op]
	switch {
	case err != nil:
		s.failed.Inc()
	case ok:
		s.ok.Inc()
	default:
		s.notOK.Inc()
	}
	s.latency.Observe(time.Since(start).Seconds())
}

// applied records what an applied entry did.
func (m *metrics) applied(r *fsm.Result) {
	if r.Code == fsm.Expired {
		m.expiries.Inc()
	}
}

// timedLogStore times the log store's writes for fencer_log_store_write_seconds.
type timedLogStore struct {
	raft.LogStore
	h prometheus.Histogram
}

// IsMonotonic passes on the store's raft.MonotonicLogStore answer: raft-wal
// refuses a gap in the log, so Raft must clear the log, not leave a gap,
// after restoring a snapshot (FENCE.SNAPSHOT restore). Hiding it broke that.
func (s timedLogStore) IsMonotonic() bool {
	m, ok := s.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

func (s timedLogStore) StoreLog(l *raft.Log) error {
	defer s.observe(time.Now())
	return s.LogStore.StoreLog(l)
}

func (s timedLogStore) StoreLogs(ls []*raft.Log) error {
	defer s.observe(time.Now())
	return s.LogStore.StoreLogs(ls)
}

func (s timedLogStore) observe(start time.Time) { s.h.Observe(time.Since(start).Seconds()) }
