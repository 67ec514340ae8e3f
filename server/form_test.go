package server

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// DecideFormation's cases (docs/safety.md, "Clusters that form
// themselves"): bootstrap only with exactly the expected servers, all
// unconfigured; never once any server has a configuration.
func TestDecideFormation(t *testing.T) {
	fresh := func(id string) FormingReport {
		return FormingReport{ID: id, RaftAddr: id + ":1", Expect: 3, Replayed: true}
	}
	bootstrapped := func(id, cluster string, members ...FormingMember) FormingReport {
		r := fresh(id)
		r.ClusterID, r.Members = cluster, members
		return r
	}
	m := func(id, client string) FormingMember {
		return FormingMember{ID: id, RaftAddr: id + ":1", ClientAddr: client}
	}
	leader := func(r FormingReport) FormingReport { r.Leader = true; return r }
	saw := func(r FormingReport, ids ...string) FormingReport { r.Seen = ids; return r }
	self := fresh("b")
	tests := []struct {
		name    string
		self    FormingReport
		reports []FormingReport
		want    FormStep
		servers []string
		lost    bool
	}{
		{name: "alone", self: self, want: FormWait},
		{name: "two of three", self: self, reports: []FormingReport{fresh("a"), self}, want: FormWait},
		{name: "all three, sorted by ID", self: self, reports: []FormingReport{saw(fresh("c"), "a", "b", "c"), self, saw(fresh("a"), "a", "b", "c")}, want: FormBootstrap, servers: []string{"a", "b", "c"}},
		{name: "all three, one not yet having seen them", self: self, reports: []FormingReport{saw(fresh("c"), "a", "b", "c"), self, fresh("a")}, want: FormWait},
		{name: "all three, one having seen others", self: self, reports: []FormingReport{saw(fresh("c"), "a", "b", "c"), self, saw(fresh("a"), "a", "b", "d")}, want: FormWait},
		{name: "one node at two addresses counts once", self: self, reports: []FormingReport{fresh("a"), fresh("a")}, want: FormWait},
		{name: "more than expected", self: self, reports: []FormingReport{fresh("a"), fresh("c"), fresh("d")}, want: FormWait},
		{name: "a different expectation", self: self, reports: []FormingReport{fresh("a"), {ID: "c", RaftAddr: "c:1", Expect: 5}}, want: FormWait},
		{name: "a peer bootstrapped, no ID yet", self: self, reports: []FormingReport{bootstrapped("a", "", m("a", ""), m("b", ""), m("c", "")), fresh("c")}, want: FormWait},
		{name: "a peer bootstrapped without this node", self: self, reports: []FormingReport{bootstrapped("a", "", m("a", ""), m("c", ""), m("d", "")), fresh("c")}, want: FormWait},
		{name: "named, never ran", self: self, reports: []FormingReport{leader(bootstrapped("a", "X", m("a", "a:0"), m("b", ""), m("c", "c:0")))}, want: FormWait},
		{name: "named with an address: its state was lost", self: self, reports: []FormingReport{bootstrapped("a", "X", m("a", "a:0"), m("b", "b:0"), m("c", "c:0"))}, want: FormWait, lost: true},
		{name: "a cluster formed without it", self: self, reports: []FormingReport{leader(bootstrapped("a", "X", m("a", "a:0"), m("c", "c:0"), m("d", "d:0"))), fresh("c")}, want: FormJoin},
		{name: "a cluster formed without it, its leader not reached", self: self, reports: []FormingReport{bootstrapped("a", "X", m("a", "a:0"), m("c", "c:0"), m("d", "d:0")), fresh("c")}, want: FormWait},
		{name: "a peer still replaying its log is not counted", self: self, reports: []FormingReport{{ID: "a", RaftAddr: "a:1", Expect: 3, ClusterID: "", Members: []FormingMember{m("a", ""), m("b", ""), m("c", "")}}}, want: FormWait},
		{name: "configured by a leader, but its address was recorded before", self: bootstrapped("b", "", m("b", "")), reports: []FormingReport{bootstrapped("a", "X", m("a", "a:0"), m("b", "b:0"))}, want: FormWait, lost: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := DecideFormation(tt.self, tt.reports)
			if d.Step != tt.want || errors.Is(d.Err, ErrLostMember) != tt.lost {
				t.Fatalf("step %d, err %v (%s); want step %d, lost %v", d.Step, d.Err, d.Why, tt.want, tt.lost)
			}
			var ids []string
			for _, s := range d.Servers {
				ids = append(ids, s.ID)
			}
			if len(ids) != len(tt.servers) {
				t.Fatalf("servers %v, want %v", ids, tt.servers)
			}
			for i := range ids {
				if ids[i] != tt.servers[i] {
					t.Fatalf("servers %v, want %v", ids, tt.servers)
				}
			}
		})
	}
}

// Formation lets a node vote only on evidence that it never ran as a
// member (it bootstraps, joins as a new member, or the cluster's leader
// names it without a recorded address); every other case waits without a
// vote or refuses. The review of the first version found each of these.
func TestDecideFormationNeedsEvidence(t *testing.T) {
	m := func(id, raft, client string) FormingMember {
		return FormingMember{ID: id, RaftAddr: raft, ClientAddr: client}
	}
	self := FormingReport{ID: "b", RaftAddr: "b:1", Expect: 3, Replayed: true}
	fresh := func(id string) FormingReport {
		return FormingReport{ID: id, RaftAddr: id + ":1", Expect: 3, Replayed: true}
	}
	replicated := self
	replicated.Members = []FormingMember{m("a", "a:1", "a:0"), m("b", "b:1", ""), m("c", "c:1", "c:0")}
	follower := FormingReport{ID: "a", RaftAddr: "a:1", Expect: 3, Replayed: true, ClusterID: "X", Members: replicated.Members}
	lead := func(r FormingReport) FormingReport { r.Leader = true; return r }
	first := func(id string, last uint64) FormingReport {
		return FormingReport{ID: id, RaftAddr: id + ":1", Expect: 3, Replayed: true, HasState: true, LastIndex: last,
			Members: []FormingMember{m("a", "a:1", ""), m("b", "b:1", ""), m("c", "c:1", "")}}
	}
	tests := []struct {
		name    string
		self    FormingReport
		reports []FormingReport
		want    FormStep
		vote    bool
		err     []string // substrings of the error, if one
		why     []string // substrings of Why
	}{
		// F1: a leader's replication reached a node that lost its state;
		// nobody answers it: no evidence, no vote.
		{name: "a configuration replicated to it, nobody reached", self: replicated, want: FormWait},
		// F1: a follower's view is not evidence (it may lag the record).
		{name: "named without an address by a follower only", self: self, reports: []FormingReport{follower}, want: FormWait},
		// F3: a peer that has Raft state counts as configured before it
		// has replayed: never bootstrap beside it.
		{name: "a configured peer still replaying, two fresh", self: self, reports: []FormingReport{fresh("c"), fresh("d"),
			{ID: "a", RaftAddr: "a:1", Expect: 3, Members: []FormingMember{m("a", "a:1", ""), m("x", "x:1", ""), m("y", "y:1", "")}}}, want: FormWait},
		// F5: named at a Raft address it no longer has.
		{name: "named at another Raft address", self: self, reports: []FormingReport{{ID: "a", RaftAddr: "a:1", Expect: 3, Replayed: true, ClusterID: "X",
			Members: []FormingMember{m("a", "a:1", "a:0"), m("b", "10.0.0.9:1", ""), m("c", "c:1", "c:0")}}}, want: FormWait, why: []string{"10.0.0.9:1", "b:1", "FENCE.REMOVE b"}},
		// F6: two clusters answer: refuse, naming both.
		{name: "two cluster IDs", self: self, reports: []FormingReport{
			{ID: "a", RaftAddr: "a:1", Expect: 3, Replayed: true, ClusterID: "X", Members: []FormingMember{m("a", "a:1", "a:0")}},
			{ID: "c", RaftAddr: "c:1", Expect: 3, Replayed: true, ClusterID: "Y", Members: []FormingMember{m("c", "c:1", "c:0")}, Via: "10.0.0.3:7379"}}, want: FormWait, err: []string{"cluster X (a)", "cluster Y (c at 10.0.0.3:7379)"}},
		// The evidence that lets it vote.
		// A leader of this build recorded every voter before it was
		// ready (recordVoters): a leader naming it without any record is
		// of an earlier build, and its word no evidence.
		{name: "the leader names it without any record", self: self, reports: []FormingReport{lead(follower)}, want: FormWait, why: []string{"without any record"}},
		{name: "the leader names it recorded as a voter (ran)", self: self, reports: []FormingReport{lead(FormingReport{ID: "a", RaftAddr: "a:1", ClusterID: "X", Replayed: true,
			Members: []FormingMember{m("a", "a:1", "a:0"), {ID: "b", RaftAddr: "b:1", Ran: true}}})}, want: FormWait, err: []string{"recorded as a voter", "FENCE.REMOVE b"}},
		{name: "a lagging follower names it recorded as a voter (ran)", self: self, reports: []FormingReport{{ID: "c", RaftAddr: "c:1", ClusterID: "X",
			Members: []FormingMember{m("c", "c:1", "c:0"), {ID: "b", RaftAddr: "b:1", Ran: true}}}}, want: FormWait, err: []string{"recorded as a voter"}},
		{name: "the leader does not name it: a new member", self: self, reports: []FormingReport{lead(FormingReport{ID: "a", RaftAddr: "a:1", ClusterID: "X", Replayed: true, Members: []FormingMember{m("a", "a:1", "a:0")}})}, want: FormJoin, vote: true},
		{name: "the leader names it at another Raft address", self: self, reports: []FormingReport{lead(FormingReport{ID: "a", RaftAddr: "a:1", ClusterID: "X", Replayed: true,
			Members: []FormingMember{m("a", "a:1", "a:0"), m("b", "10.0.0.9:1", "")}})}, want: FormWait, why: []string{"10.0.0.9:1"}},
		{name: "a tombstone: its removal was cut short", self: self, reports: []FormingReport{{ID: "a", RaftAddr: "a:1", ClusterID: "X", Replayed: true,
			Members: []FormingMember{m("a", "a:1", "a:0"), {ID: "b", RaftAddr: "b:1", Removed: true}}}}, want: FormWait, err: []string{"was removed", "FENCE.REMOVE b"}},
		{name: "first configuration, the others at the bootstrap entry or without state", self: self, reports: []FormingReport{first("a", 1), fresh("c")}, want: FormWait, vote: true},
		{name: "first configuration, another has entries past the bootstrap", self: self, reports: []FormingReport{first("a", 1), first("c", 4)}, want: FormWait},
		{name: "first configuration, another not reached", self: self, reports: []FormingReport{first("a", 1)}, want: FormWait},
		{name: "first configuration without it", self: FormingReport{ID: "d", RaftAddr: "d:1", Expect: 3}, reports: []FormingReport{first("a", 1), fresh("c")}, want: FormWait},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := DecideFormation(tt.self, tt.reports)
			if d.Step != tt.want || d.Vote != tt.vote || (d.Err != nil) != (tt.err != nil) {
				t.Fatalf("step %d, vote %v, err %v (%s); want step %d, vote %v, err %v", d.Step, d.Vote, d.Err, d.Why, tt.want, tt.vote, tt.err)
			}
			for _, s := range tt.err {
				if !strings.Contains(d.Err.Error(), s) {
					t.Errorf("error %q does not say %q", d.Err, s)
				}
			}
			for _, s := range tt.why {
				if !strings.Contains(d.Why, s) {
					t.Errorf("why %q does not say %q", d.Why, s)
				}
			}
		})
	}
}

// ErrTwoClusters counts a cluster whose servers have not applied its ID
// yet (restarting, with no snapshot): before, it counted only applied IDs
// (failed on deploy 2eb1653: "step 2, vote true, err <nil> (cluster X's
// leader a does not name this node: joining as a new member)"). A member of
// cluster Y that lost its state, given (by mistake) --join addresses of
// cluster X as well, while Y restarts (its servers have state but have not
// applied its ID yet: no snapshot, no leader yet), joins X as a new member
// and opens its gate first (FormJoin). With no configuration, its Raft
// grants its empty vote to any candidate, and Y's configuration still
// names it: Y's candidates ask it.
func TestDecideFormationTwoClustersOneRestarting(t *testing.T) {
	self := FormingReport{ID: "b", RaftAddr: "b:1", Expect: 3}
	xLeader := FormingReport{ID: "a", RaftAddr: "a:1", Expect: 3, ClusterID: "X", Leader: true, Replayed: true, HasState: true, LastIndex: 90,
		Members: []FormingMember{{ID: "a", RaftAddr: "a:1", ClientAddr: "a:0"}}}
	yRestarting := FormingReport{ID: "c", RaftAddr: "c:1", Expect: 3, HasState: true, LastIndex: 40,
		Members: []FormingMember{{ID: "b", RaftAddr: "b:1"}, {ID: "c", RaftAddr: "c:1"}, {ID: "d", RaftAddr: "d:1"}}}
	d := DecideFormation(self, []FormingReport{xLeader, yRestarting})
	if d.Vote || !errors.Is(d.Err, ErrTwoClusters) {
		t.Fatalf("a server of another cluster (c, with state, whose configuration names this node) answers beside cluster X's leader: step %d, vote %v, err %v (%s); want a refusal, never a vote",
			d.Step, d.Vote, d.Err, d.Why)
	}
	// A server of cluster X itself that lags (its configuration from
	// before this node was removed) is no second cluster.
	xLeader.Members = append(xLeader.Members, FormingMember{ID: "c", RaftAddr: "c:1", ClientAddr: "c:0"})
	if d := DecideFormation(self, []FormingReport{xLeader, yRestarting}); d.Err != nil || d.Step != FormJoin {
		t.Fatalf("beside cluster X's leader, a lagging member of X names this node: step %d, err %v (%s); want a join", d.Step, d.Err, d.Why)
	}
}

// A server's data directory wiped mid-formation (it comes back under a
// new ID, B2) while another bootstraps gives no second configuration. A
// survey is not atomic: C's round gets A's answer from before A
// bootstrapped and B2's. A bootstrapped {A, B, C}; C, counting B2, would
// bootstrap {A, B2, C}: two configurations at index 1, term 1 (failed so
// on deploy 2eb1653, when the reports carried no Seen). Every server of a
// bootstrap must have seen the same servers: A's report says it saw B.
func TestDecideFormationWipeMidFormationOneConfiguration(t *testing.T) {
	fresh := func(id string, seen ...string) FormingReport {
		return FormingReport{ID: id, RaftAddr: id + ":1", Expect: 3, Seen: seen}
	}
	a := DecideFormation(fresh("A"), []FormingReport{fresh("A"), fresh("B", "A", "B", "C"), fresh("C", "A", "B", "C")})
	if a.Step != FormBootstrap {
		t.Fatalf("A, all three having seen the same: step %d (%s); want a bootstrap", a.Step, a.Why)
	}
	c := DecideFormation(fresh("C"), []FormingReport{fresh("A", "A", "B", "C"), fresh("B2", "A", "B2", "C"), fresh("C")})
	conf := func(d FormDecision) string {
		var ids []string
		for _, s := range d.Servers {
			ids = append(ids, s.ID)
		}
		return fmt.Sprint(d.Step, ids)
	}
	if c.Step == FormBootstrap && conf(a) != conf(c) {
		t.Fatalf("A bootstraps %s, C (A's answer from before, B wiped and back as B2) %s: two configurations", conf(a), conf(c))
	}
}
