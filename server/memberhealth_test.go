package server

import (
	"strings"
	"testing"
	"time"
)

// A member is unhealthy once it has left the leader's probe unanswered for
// longer than the limit, or is further behind than the lag limit; one not
// asked yet in a new leader's first moments is not called unreachable.
func TestJudgeMemberHealth(t *testing.T) {
	n := &Node{cfg: DefaultConfig()}
	n.cfg.MemberUnreachableAfter = 2 * time.Second
	n.cfg.MemberLagLimit = 100
	for _, tc := range []struct {
		name    string
		h       MemberHealth
		leading time.Duration
		healthy bool
		problem string
		lag     uint64
	}{
		{"answered, caught up", MemberHealth{Answered: true, LastAnswer: time.Second, Progress: Progress{Applied: 1000}}, time.Minute, true, "", 0},
		{"answered, a little behind", MemberHealth{Answered: true, Progress: Progress{Applied: 950}}, time.Minute, true, "", 50},
		{"too far behind", MemberHealth{Answered: true, Progress: Progress{Applied: 899}}, time.Minute, false, "101 entries behind (limit 100)", 101},
		{"silent too long", MemberHealth{Answered: true, LastAnswer: 3 * time.Second, Progress: Progress{Applied: 1000}}, time.Minute, false, "no answer for 3s (unreachable after 2s)", 0},
		{"not asked yet", MemberHealth{}, time.Second, true, "not asked yet", 0},
		{"never answered this leader", MemberHealth{}, 5 * time.Second, false, "no answer since this leader took over 5s ago", 0},
		{"ahead of the leader's commit", MemberHealth{Answered: true, Progress: Progress{Applied: 1002}}, time.Minute, true, "", 0},
	} {
		h := tc.h
		n.judge(&h, 1000, tc.leading)
		if h.Healthy != tc.healthy || !strings.HasPrefix(h.Problem, tc.problem) || h.Lag != tc.lag {
			t.Errorf("%s: healthy %v, lag %d, problem %q; want %v, %d, %q", tc.name, h.Healthy, h.Lag, h.Problem, tc.healthy, tc.lag, tc.problem)
		}
	}
	n.cfg.MemberUnreachableAfter, n.cfg.MemberLagLimit = 0, 0
	if u, l := n.HealthLimits(); u != 5*time.Second || l != n.cfg.TrailingLogs {
		t.Fatalf("zero limits default to %v and %d, want 5s and the trailing logs", u, l)
	}
}
