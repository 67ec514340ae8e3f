package server

import (
	"errors"
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
		{name: "all three, sorted by ID", self: self, reports: []FormingReport{fresh("c"), self, fresh("a")}, want: FormBootstrap, servers: []string{"a", "b", "c"}},
		{name: "one node at two addresses counts once", self: self, reports: []FormingReport{fresh("a"), fresh("a")}, want: FormWait},
		{name: "more than expected", self: self, reports: []FormingReport{fresh("a"), fresh("c"), fresh("d")}, want: FormWait},
		{name: "a different expectation", self: self, reports: []FormingReport{fresh("a"), {ID: "c", RaftAddr: "c:1", Expect: 5}}, want: FormWait},
		{name: "a peer bootstrapped, no ID yet", self: self, reports: []FormingReport{bootstrapped("a", "", m("a", ""), m("b", ""), m("c", "")), fresh("c")}, want: FormWait},
		{name: "a peer bootstrapped without this node", self: self, reports: []FormingReport{bootstrapped("a", "", m("a", ""), m("c", ""), m("d", "")), fresh("c")}, want: FormWait},
		{name: "named, never ran", self: self, reports: []FormingReport{bootstrapped("a", "X", m("a", "a:0"), m("b", ""), m("c", "c:0"))}, want: FormWait},
		{name: "named with an address: its state was lost", self: self, reports: []FormingReport{bootstrapped("a", "X", m("a", "a:0"), m("b", "b:0"), m("c", "c:0"))}, want: FormWait, lost: true},
		{name: "a cluster formed without it", self: self, reports: []FormingReport{bootstrapped("a", "X", m("a", "a:0"), m("c", "c:0"), m("d", "d:0")), fresh("c")}, want: FormJoin},
		{name: "a peer still replaying its log is not counted", self: self, reports: []FormingReport{{ID: "a", RaftAddr: "a:1", Expect: 3, ClusterID: "", Members: []FormingMember{m("a", ""), m("b", ""), m("c", "")}}}, want: FormWait},
		{name: "configured", self: bootstrapped("b", "", m("b", "")), reports: []FormingReport{fresh("a"), fresh("c")}, want: FormDone},
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
