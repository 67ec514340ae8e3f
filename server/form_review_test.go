package server

import (
	"fmt"
	"testing"
)

// Adversarial review of formation (the findings are in
// /work/notes-deploy-review.md): cases of the pure decision that break the
// claims of docs/safety.md, "Clusters that form themselves". Each fails on
// deploy 2eb1653.

// R4: ErrTwoClusters counts only the IDs servers have applied. A member of
// cluster Y that lost its state, given (by mistake) --join addresses of
// cluster X as well, while Y restarts (its servers have state but have not
// applied its ID yet: no snapshot, no leader yet), joins X as a new member
// and opens its gate first (FormJoin). With no configuration, its Raft
// grants its empty vote to any candidate, and Y's configuration still
// names it: Y's candidates ask it.
func TestReviewTwoClustersOneRestarting(t *testing.T) {
	self := FormingReport{ID: "b", RaftAddr: "b:1", Expect: 3}
	xLeader := FormingReport{ID: "a", RaftAddr: "a:1", Expect: 3, ClusterID: "X", Leader: true, Replayed: true, HasState: true, LastIndex: 90,
		Members: []FormingMember{{ID: "a", RaftAddr: "a:1", ClientAddr: "a:0"}}}
	yRestarting := FormingReport{ID: "c", RaftAddr: "c:1", Expect: 3, HasState: true, LastIndex: 40,
		Members: []FormingMember{{ID: "b", RaftAddr: "b:1"}, {ID: "c", RaftAddr: "c:1"}, {ID: "d", RaftAddr: "d:1"}}}
	d := DecideFormation(self, []FormingReport{xLeader, yRestarting})
	if d.Vote || d.Err == nil {
		t.Fatalf("a server of another cluster (c, with state, whose configuration names this node) answers beside cluster X's leader: step %d, vote %v, err %v (%s); want a refusal, never a vote",
			d.Step, d.Vote, d.Err, d.Why)
	}
}

// R5: docs/safety.md, "Interleavings": "A server's data directory is wiped
// mid-formation: it gets a new ID, which no configuration names, and joins
// as a new member". A survey is not atomic: C's round gets A's answer from
// before A bootstrapped and B's from after B was wiped and restarted as
// B2. A bootstrapped {A, B, C}; C bootstraps {A, B2, C}: two different
// configurations at index 1, term 1 (B2 then votes by rule 4 in C's).
func TestReviewWipeMidFormationTwoConfigurations(t *testing.T) {
	fresh := func(id string) FormingReport { return FormingReport{ID: id, RaftAddr: id + ":1", Expect: 3} }
	a := DecideFormation(fresh("A"), []FormingReport{fresh("A"), fresh("B"), fresh("C")})
	c := DecideFormation(fresh("C"), []FormingReport{fresh("A"), fresh("B2"), fresh("C")})
	conf := func(d FormDecision) string {
		var ids []string
		for _, s := range d.Servers {
			ids = append(ids, s.ID)
		}
		return fmt.Sprint(d.Step, ids)
	}
	if a.Step == FormBootstrap && c.Step == FormBootstrap && conf(a) != conf(c) {
		t.Fatalf("A bootstraps %s, C (A's answer from before, B wiped and back as B2) %s: two configurations", conf(a), conf(c))
	}
}
