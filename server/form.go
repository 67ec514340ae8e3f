package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/fencerlock/fencer/fsm"
	"github.com/hashicorp/raft"
)

// Clusters that form themselves (Config.BootstrapExpect; docs/safety.md,
// "Clusters that form themselves", has the argument). Every server is
// started the same way, with the number of servers N and the client
// addresses of all of them. A server without Raft state starts Raft with
// no configuration, behind a gate (votegate.go) that refuses every Raft RPC
// until formation has evidence that the server never ran as a member: Raft
// would otherwise grant its empty log's vote to any candidate and take any
// leader's entries. fencerd asks every address, again and again, for its
// FormingReport (FENCE.FORMING) and calls DecideFormation:
//
//   - a server of a cluster that names this node with any record (a client
//     address, fsm.RanMember, or a tombstone, fsm.RemovedMember) shows it
//     ran, or may have, as a member: refused (ErrLostMember); every voter
//     is recorded before a leader grants anything (Node.recordVoters) and a
//     joining one before it is added (Node.Join); servers of two clusters:
//     refused;
//   - if a server belongs to a cluster that has an ID (a leader of it was
//     ready once), only that cluster's current leader is believed: if it
//     does not name the node, the node joins as a new member; if it names
//     it without a record (not a leader of this build) or is not reached,
//     the node waits;
//   - if a server has Raft state but its cluster no ID yet, the node never
//     bootstraps; it opens its gate only if that configuration names it and
//     every other server of it answers with at most the bootstrap entry in
//     its log (then no leader ever wrote anything the node could have
//     acknowledged);
//   - otherwise every server answering is without state; when exactly N
//     distinct ones (by node ID, the node included) answer with the same N,
//     each having seen the same N in its own latest round (Seen), the node
//     bootstraps Raft with all N as voters, sorted by ID.
//
// So a node votes only when it bootstraps, joins as a new member, or all
// other servers of a first configuration vouch that it never ran; in every
// other case it waits, and an operator resolves what the log says.

// FormingReport is what a server says of itself to formation.
type FormingReport struct {
	ID       string
	RaftAddr string
	// Expect is its Config.BootstrapExpect (0 if it forms nothing).
	Expect int
	// ClusterID is the ID of its cluster, "" before it applied one.
	ClusterID string
	// Members is its latest Raft configuration, empty before it has one.
	Members []FormingMember
	// HasState reports that it has Raft state (a term, a log, a snapshot),
	// whether or not it has applied it yet; LastIndex is its log's last
	// index (1 after a bootstrap, before any leader wrote).
	HasState  bool
	LastIndex uint64
	// Leader reports that it is its cluster's ready leader (it applied
	// everything committed before its term) and confirmed that with a
	// quorum while it answered: its table is the cluster's.
	Leader bool
	// Replayed reports that its table has caught up: it applied the log it
	// restarted with, or, with a leader known, everything this node knows
	// to be committed (an uncommitted tail is never applied).
	Replayed bool
	// LeaderAddr is the client address of the leader it knows, if any.
	LeaderAddr string
	// Seen is the IDs, sorted, of the servers without state its latest
	// round of formation reached, itself included, if none had state (nil
	// before its first round). Every server of a bootstrap must have seen
	// the same servers, so that a server wiped and back under a new ID
	// while the others bootstrap makes them wait rather than write two
	// configurations.
	Seen []string
	// Via is the address it answered on (set by the asking side).
	Via string
}

// FormingMember is a server of a configuration and the client address the
// cluster recorded for it ("" until the member recorded it). Removed
// reports a tombstone: the member was removed, perhaps not completely. Ran
// reports a record without an address (fsm.RanMember): a leader recorded
// the member as a voter before it granted anything.
type FormingMember struct {
	ID, RaftAddr, ClientAddr string
	Removed, Ran             bool
}

// FormStep is what formation does next.
type FormStep int

// The steps of DecideFormation.
const (
	// FormWait: ask again later.
	FormWait FormStep = iota
	// FormBootstrap: bootstrap with FormDecision.Servers.
	FormBootstrap
	// FormJoin: join the cluster that formed as a new member.
	FormJoin
)

// FormDecision is DecideFormation's answer.
type FormDecision struct {
	Step FormStep
	// Vote reports evidence that the node never ran as a member of the
	// clusters it reached, so it may open its gate (Node.AllowVotes): it
	// bootstraps, joins as a new member, or is vouched for.
	Vote bool
	// Servers is the configuration to bootstrap with (FormBootstrap).
	Servers []FormingReport
	// Why says what the decision rests on, for the log.
	Why string
	// Err, if set, stops the node (ErrLostMember, ErrTwoClusters).
	Err error
}

// bootstrapIndex is the last index of a log that holds only the
// configuration BootstrapCluster wrote.
const bootstrapIndex = 1

// configured reports that r has Raft state, applied or not.
func (r FormingReport) configured() bool {
	return r.HasState || r.LastIndex > 0 || len(r.Members) > 0 || r.ClusterID != ""
}

// named returns the member id of r's configuration, if it has one.
func (r FormingReport) named(id string) (FormingMember, bool) {
	for _, m := range r.Members {
		if m.ID == id {
			return m, true
		}
	}
	return FormingMember{}, false
}

// DecideFormation decides formation's next step for self, a node without
// Raft state expecting self.Expect servers, from the reports of the servers
// it reached (self may be among them; a node is known by its ID). It is a
// pure function.
func DecideFormation(self FormingReport, reports []FormingReport) FormDecision {
	peers := map[string]FormingReport{}
	for _, r := range reports {
		if r.ID != "" && r.ID != self.ID {
			if old, dup := peers[r.ID]; !dup || r.Leader && !old.Leader {
				peers[r.ID] = r
			}
		}
	}
	ids := make([]string, 0, len(peers))
	for id := range peers {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	clusters := map[string][]string{} // cluster ID → where it answered
	for _, id := range ids {
		if r := peers[id]; r.ClusterID != "" {
			clusters[r.ClusterID] = append(clusters[r.ClusterID], where(r))
		}
	}
	if len(clusters) > 1 {
		var two []string
		for c, at := range clusters {
			two = append(two, fmt.Sprintf("cluster %s (%s)", c, strings.Join(at, ", ")))
		}
		sort.Strings(two)
		return FormDecision{Err: fmt.Errorf("%w: the --join addresses answer for %s; a node joins one cluster: give it the addresses of that one only", ErrTwoClusters, strings.Join(two, " and "))}
	}
	// A recorded address or a tombstone, seen by any server (even one
	// that lags), is evidence that this node ran as a member.
	for _, id := range ids {
		r := peers[id]
		m, ok := r.named(self.ID)
		switch {
		case ok && m.Removed:
			return FormDecision{Err: fmt.Errorf("%w: %q was removed from cluster %s (as %s says), but it is still in its configuration, and this data directory has no Raft state: finish the removal (FENCE.REMOVE %s through any member), then start it again; see docs/operations.md", ErrLostMember, self.ID, r.ClusterID, where(r), self.ID)}
		case ok && m.ClientAddr != "":
			return FormDecision{Err: fmt.Errorf("%w: %q is a member of cluster %s (as %s says), with a recorded client address, and this data directory has no Raft state (its state was lost?): remove it first (FENCE.REMOVE %s through any member), then start it again; see docs/operations.md", ErrLostMember, self.ID, r.ClusterID, where(r), self.ID)}
		case ok && m.Ran:
			return FormDecision{Err: fmt.Errorf("%w: %q is a member of cluster %s (as %s says), recorded as a voter when a leader became ready (it may have acknowledged grants), and this data directory has no Raft state (its state was lost, or it was never started before the cluster formed without it): remove it first (FENCE.REMOVE %s through any member), then start it again; see docs/operations.md", ErrLostMember, self.ID, r.ClusterID, where(r), self.ID)}
		}
	}
	for _, id := range ids {
		if r := peers[id]; r.ClusterID != "" {
			return decideFormed(self, peers, ids, r.ClusterID)
		}
	}
	for _, id := range ids {
		if peers[id].configured() {
			return decideFirst(self, peers, ids)
		}
	}
	servers := []FormingReport{self}
	for _, id := range ids {
		r := peers[id]
		if r.Expect != self.Expect {
			return FormDecision{Step: FormWait, Why: fmt.Sprintf("%s expects %d servers, this node %d: not forming until they agree", id, r.Expect, self.Expect)}
		}
		servers = append(servers, r)
	}
	switch {
	case len(servers) < self.Expect:
		return FormDecision{Step: FormWait, Why: fmt.Sprintf("%d of %d servers reached", len(servers), self.Expect)}
	case len(servers) > self.Expect:
		return FormDecision{Step: FormWait, Why: fmt.Sprintf("%d servers without state reached, more than the %d expected: not forming (see docs/operations.md)", len(servers), self.Expect)}
	}
	sort.Slice(servers, func(i, j int) bool { return servers[i].ID < servers[j].ID })
	var set []string
	for _, s := range servers {
		set = append(set, s.ID)
	}
	for _, s := range servers {
		if s.ID != self.ID && !slices.Equal(s.Seen, set) {
			return FormDecision{Step: FormWait, Why: fmt.Sprintf("all %d servers reached, none with state; waiting until %s has reached the same ones (it saw %v)", self.Expect, where(s), s.Seen)}
		}
	}
	return FormDecision{Step: FormBootstrap, Vote: true, Servers: servers, Why: fmt.Sprintf("all %d servers reached, none with state", self.Expect)}
}

// decideFormed is DecideFormation once a server of cluster has an ID:
// only the cluster's leader is believed.
func decideFormed(self FormingReport, peers map[string]FormingReport, ids []string, cluster string) FormDecision {
	for _, id := range ids {
		r := peers[id]
		if !r.Leader || !r.Replayed || r.ClusterID != cluster {
			continue
		}
		// A server with state and no cluster ID applied yet (one
		// restarting) whose configuration names this node, and which this
		// leader does not count as a member, is of another cluster.
		for _, pid := range ids {
			p := peers[pid]
			if _, named := p.named(self.ID); !named || p.ClusterID != "" || pid == r.ID {
				continue
			}
			if _, member := r.named(pid); !member {
				return FormDecision{Err: fmt.Errorf("%w: the --join addresses answer for cluster %s (%s) and for a cluster that has not applied its ID yet (%s, whose configuration names this node, and which %s's leader does not count as a member); a node joins one cluster: give it the addresses of that one only", ErrTwoClusters, cluster, where(r), where(p), cluster)}
			}
		}
		m, ok := r.named(self.ID)
		switch {
		case !ok:
			return FormDecision{Step: FormJoin, Vote: true, Why: fmt.Sprintf("cluster %s's leader %s does not name this node: joining as a new member", cluster, where(r))}
		case m.RaftAddr != self.RaftAddr:
			return FormDecision{Step: FormWait, Why: staleAddr(self, m, cluster, where(r))}
		}
		// A ready leader recorded every voter before it became ready
		// (recordVoters), and a joining one before it was added: a
		// leader naming this node without any record is not of this
		// build. Its word is no evidence.
		return FormDecision{Step: FormWait, Why: fmt.Sprintf("cluster %s's leader %s names this node without any record of it (a leader of an earlier fencer?): not voting; remove it (FENCE.REMOVE %s) and restart it to join as a new member; see docs/operations.md", cluster, where(r), self.ID)}
	}
	for _, id := range ids {
		if m, ok := peers[id].named(self.ID); ok && m.RaftAddr != self.RaftAddr {
			return FormDecision{Step: FormWait, Why: staleAddr(self, m, cluster, where(peers[id]))}
		}
	}
	return FormDecision{Step: FormWait, Why: fmt.Sprintf("cluster %s answers, but not its leader: waiting to ask the leader whether this node ran as a member (a leader whose client port cannot be reached or refuses this node's TLS or credentials, or a cluster without a leader, keeps this node waiting)", cluster)}
}

// decideFirst is DecideFormation when a server has Raft state and no
// cluster ID: the node opens its gate only if a configuration names it
// and every other server of it answers with no more than the bootstrap
// entry, so that no leader ever wrote an entry it could have acknowledged.
func decideFirst(self FormingReport, peers map[string]FormingReport, ids []string) FormDecision {
	for _, id := range ids {
		r := peers[id]
		m, ok := r.named(self.ID)
		if !ok {
			continue
		}
		if m.RaftAddr != self.RaftAddr {
			return FormDecision{Step: FormWait, Why: staleAddr(self, m, "(no ID yet)", where(r))}
		}
		for _, s := range r.Members {
			if s.ID == self.ID {
				continue
			}
			p, ok := peers[s.ID]
			switch {
			case !ok:
				return FormDecision{Step: FormWait, Why: fmt.Sprintf("named in %s's configuration, whose cluster has no ID yet; %s does not answer: waiting for the cluster's leader, or for every server of it", where(r), s.ID)}
			case p.configured() && p.LastIndex > bootstrapIndex:
				return FormDecision{Step: FormWait, Why: fmt.Sprintf("named in %s's configuration, whose cluster has no ID yet; %s has entries past the bootstrap: waiting for the cluster's leader", where(r), where(p))}
			}
		}
		return FormDecision{Step: FormWait, Vote: true, Why: fmt.Sprintf("named in %s's configuration, and none of its other servers has more than the bootstrap entry: this node never ran; waiting for the election", where(r))}
	}
	return FormDecision{Step: FormWait, Why: "a server has a configuration without this node and no cluster ID yet: waiting to join once it has one"}
}

// staleAddr says that the node is named at another Raft address than its
// own: no leader reaches it there.
func staleAddr(self FormingReport, m FormingMember, cluster, at string) string {
	return fmt.Sprintf("cluster %s (as %s says) names this node at Raft address %s, but it is at %s now: no leader reaches it there, and it waits. "+
		"Give it its old address again (--raft-advertise), or remove it (FENCE.REMOVE %s through any member) and restart it: it joins as a new member; see docs/operations.md",
		cluster, at, m.RaftAddr, self.RaftAddr, self.ID)
}

// where names a report's server for the log: its ID and the address it
// answered on.
func where(r FormingReport) string {
	if r.Via == "" {
		return r.ID
	}
	return r.ID + " at " + r.Via
}

// FormingReport returns this node's report, from its own state and, on a
// leader, one quorum round trip (no leader is needed: it answers while the
// cluster forms).
func (n *Node) FormingReport() FormingReport {
	r := FormingReport{ID: n.id, RaftAddr: n.RaftAddr(), Expect: n.cfg.BootstrapExpect, ClusterID: n.table.ClusterID(),
		LastIndex: n.raft.LastIndex()}
	r.HasState = n.hadState || r.LastIndex > 0
	if s := n.formingSeen.Load(); s != nil {
		r.Seen = *s
	}
	_, r.LeaderAddr = n.Leader()
	applied := n.raft.AppliedIndex()
	switch {
	case n.raft.State() == raft.Leader:
		ready, _, _ := n.grants.state()
		if ready {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			r.Leader = n.verifyLeader(ctx) == nil
			cancel()
		}
		r.Replayed = r.Leader
	default:
		commit, _ := strconv.ParseUint(n.raft.Stats()["commit_index"], 10, 64)
		_, lid := n.raft.LeaderWithID()
		r.Replayed = applied >= n.openedIndex || lid != "" && applied >= commit
	}
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return r
	}
	addrs := n.table.Members()
	for _, s := range f.Configuration().Servers {
		id := string(s.ID)
		rec, _ := n.table.Recorded(id)
		r.Members = append(r.Members, FormingMember{ID: id, RaftAddr: string(s.Address), ClientAddr: addrs[id],
			Removed: rec == fsm.RemovedMember, Ran: rec == fsm.RanMember})
	}
	return r
}

// SetFormingSeen keeps what formation's latest round reached (Seen): the
// IDs of the servers without state, this node included, or nil if one had
// state.
func (n *Node) SetFormingSeen(reports []FormingReport) {
	ids := []string{n.id}
	for _, r := range reports {
		if r.configured() {
			n.formingSeen.Store(nil)
			return
		}
		if r.ID != "" && !slices.Contains(ids, r.ID) {
			ids = append(ids, r.ID)
		}
	}
	sort.Strings(ids)
	n.formingSeen.Store(&ids)
}

// BootstrapWith bootstraps Raft with servers, all voters, unless it has a
// configuration already (then it does nothing: another node's election
// pulled this one in first).
func (n *Node) BootstrapWith(servers []FormingReport) error {
	var conf raft.Configuration
	for _, s := range servers {
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(s.ID), Address: raft.ServerAddress(s.RaftAddr)})
	}
	err := n.raft.BootstrapCluster(conf).Error()
	if errors.Is(err, raft.ErrCantBootstrap) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("server: bootstrap: %w", err)
	}
	n.log.Info("bootstrapped the cluster with the expected servers", "servers", len(servers))
	return nil
}
