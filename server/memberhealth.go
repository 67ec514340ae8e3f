package server

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

// Member health. Raft does not tell a leader how far a follower has
// applied, nor whether a member it cannot reach is down or slow, so the
// leader asks every other member for its Progress once a second (the
// bridge does, at the member's client address) and reports each answer
// here. A new leadership starts over: what an earlier leader of this node
// gathered may be stale.

// MemberHealth is one member's health as the leader sees it.
type MemberHealth struct {
	Member
	// Answered reports whether the member answered since this node became
	// leader; LastAnswer is how long ago it last did.
	Answered   bool
	LastAnswer time.Duration
	// Reachable: it answered within the unreachable limit.
	Reachable bool
	// Progress is what the member last reported (the leader's own, now).
	Progress Progress
	// Version is the member's fencer version, as it last reported it.
	Version string
	// Lag is how many entries the member's table is behind the leader's
	// commit index (0 if it is not behind).
	Lag uint64
	// Healthy is false when the member is unreachable for longer than
	// MemberUnreachableAfter or more than MemberLagLimit entries behind;
	// Problem then says which.
	Healthy bool
	Problem string
}

// memberReport is one member's last answer.
type memberReport struct {
	// at is when the answer arrived; asked, when the question was sent.
	// The answer tells what the member ran at some moment between the
	// two: the format gate counts it from asked.
	at, asked time.Time
	progress  Progress
	version   string
}

// healthBook keeps the members' last answers, on the leader.
type healthBook struct {
	mu sync.Mutex // guards everything below
	// term is the term the reports belong to; since is when this node
	// was first seen leading in it.
	term    uint64
	since   time.Time
	reports map[string]memberReport
	// forgot is when each member's answers were last forgotten (it
	// joined again or was removed): an answer to a question asked before
	// then, still on its way, is from what held the ID before.
	forgot map[string]time.Time
}

// leadership returns when this node's current leadership began, clearing
// the reports of an earlier one. Call with mu held.
func (h *healthBook) leadership(term uint64, now time.Time) time.Time {
	if h.term != term || h.reports == nil {
		h.term, h.since, h.reports = term, now, make(map[string]memberReport)
	}
	return h.since
}

// forget drops id's answer, and every answer to a question asked before
// now.
func (h *healthBook) forget(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.reports, id)
	if h.forgot == nil {
		h.forgot = make(map[string]time.Time)
	}
	h.forgot[id] = time.Now()
}

// RecordProgress records a member's answer to the leader's health probe,
// whose question was sent at asked. A node that is not the leader ignores
// it, and so does one that forgot id's answers after asked.
func (n *Node) RecordProgress(id string, asked time.Time, p Progress, version string) {
	if n.raft.State() != raft.Leader {
		return
	}
	term, now := n.raft.CurrentTerm(), time.Now()
	n.health.mu.Lock()
	defer n.health.mu.Unlock()
	if f, ok := n.health.forgot[id]; ok {
		if !asked.After(f) {
			return
		}
		delete(n.health.forgot, id)
	}
	n.health.leadership(term, now)
	n.health.reports[id] = memberReport{at: now, asked: asked, progress: p, version: version}
	if p.FormatReadable > n.table.Format() {
		select {
		case n.format.kick <- struct{}{}:
		default:
		}
	}
}

// MemberHealth returns every member's health, sorted by ID. Only the
// leader gathers it; another node answers a *NotLeaderError.
func (n *Node) MemberHealth(ctx context.Context, version string) ([]MemberHealth, error) {
	if n.raft.State() != raft.Leader {
		return nil, n.notLeader()
	}
	ms, err := n.configuredMembers(ctx)
	if err != nil {
		return nil, err
	}
	self := n.Progress()
	term, now := n.raft.CurrentTerm(), time.Now()
	n.health.mu.Lock()
	defer n.health.mu.Unlock()
	since := n.health.leadership(term, now)
	out := make([]MemberHealth, len(ms))
	for i, m := range ms {
		h := MemberHealth{Member: m}
		if m.ID == n.id {
			h.Answered, h.Progress, h.Version = true, self, version
		} else if r, ok := n.health.reports[m.ID]; ok {
			h.Answered, h.LastAnswer, h.Progress, h.Version = true, now.Sub(r.at), r.progress, r.version
		}
		n.judge(&h, self.CommitIndex, now.Sub(since))
		out[i] = h
	}
	return out, nil
}

// judge sets h's Reachable, Lag, Healthy and Problem; leading is how long
// this node has led (a member not asked yet is not called unreachable).
func (n *Node) judge(h *MemberHealth, commit uint64, leading time.Duration) {
	limit, lagLimit := n.HealthLimits()
	h.Reachable = h.Answered && h.LastAnswer <= limit
	if h.Answered && h.Progress.Applied < commit {
		h.Lag = commit - h.Progress.Applied
	}
	switch {
	case !h.Answered && leading > limit:
		h.Problem = fmt.Sprintf("no answer since this leader took over %v ago (unreachable after %v)", leading.Round(time.Second), limit)
	case !h.Answered:
		h.Problem = "not asked yet"
		h.Healthy = true
	case !h.Reachable:
		h.Problem = fmt.Sprintf("no answer for %v (unreachable after %v)", h.LastAnswer.Round(100*time.Millisecond), limit)
	case h.Lag > lagLimit:
		h.Problem = fmt.Sprintf("%d entries behind (limit %d)", h.Lag, lagLimit)
	default:
		h.Healthy = true
	}
}

// HealthLimits returns how long a member may leave the leader's probe
// unanswered and how many entries it may be behind before it is reported
// unhealthy (Config's fields, zeros defaulted).
func (n *Node) HealthLimits() (unreachable time.Duration, lag uint64) {
	unreachable, lag = n.cfg.MemberUnreachableAfter, n.cfg.MemberLagLimit
	if unreachable == 0 {
		unreachable = DefaultConfig().MemberUnreachableAfter
	}
	if lag == 0 {
		lag = n.cfg.TrailingLogs
	}
	return unreachable, lag
}

// notLeader is the error a leader-only request gets on this node.
func (n *Node) notLeader() error {
	id, addr := n.Leader()
	return &NotLeaderError{Leader: id, LeaderAddr: addr}
}

// memberHealthCollector exports the leader's view of each member; other
// nodes export none, so that a query over every node counts each member
// once.
type memberHealthCollector struct {
	n                        *Node
	healthy, lag, lastAnswer *prometheus.Desc
}

func newMemberHealthCollector(n *Node) *memberHealthCollector {
	l := []string{"member"}
	return &memberHealthCollector{n: n,
		healthy:    prometheus.NewDesc("fencer_member_healthy", "On the leader, per member: 1 if it answers the leader's probe and is within --member-lag-limit entries, else 0.", l, nil),
		lag:        prometheus.NewDesc("fencer_member_lag_entries", "On the leader, per member: entries its table is behind the leader's commit index, as it last reported.", l, nil),
		lastAnswer: prometheus.NewDesc("fencer_member_last_answer_seconds", "On the leader, per member: seconds since it last answered the leader's probe (-1: not since this leader took over).", l, nil),
	}
}

func (c *memberHealthCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.healthy
	ch <- c.lag
	ch <- c.lastAnswer
}

func (c *memberHealthCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	hs, err := c.n.MemberHealth(ctx, "")
	if err != nil {
		return
	}
	for _, h := range hs {
		healthy, last := 0.0, -1.0
		if h.Healthy {
			healthy = 1
		}
		if h.Answered {
			last = h.LastAnswer.Seconds()
		}
		ch <- prometheus.MustNewConstMetric(c.healthy, prometheus.GaugeValue, healthy, h.ID)
		ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(h.Lag), h.ID)
		ch <- prometheus.MustNewConstMetric(c.lastAnswer, prometheus.GaugeValue, last, h.ID)
	}
}
