package server

import (
	"errors"
	"fmt"
	"sort"

	"github.com/hashicorp/raft"
)

// Clusters that form themselves (Config.BootstrapExpect; docs/safety.md,
// "Clusters that form themselves", has the argument). Every server is
// started the same way, with the number of servers N and the client
// addresses of all of them. A server without Raft state starts Raft with
// no configuration: it votes for and follows a leader whose configuration
// names it, and is otherwise idle. fencerd asks every address, again and
// again, for its FormingReport (FENCE.FORMING) and calls DecideFormation:
//
//   - once the node's own Raft has a configuration, formation is over;
//   - if any server belongs to a cluster that has an ID (a leader of it was
//     ready once), the node is either named in it with a recorded client
//     address (a member whose state was lost: refused, ErrLostMember),
//     named without one (a member of the first configuration that never
//     ran: it waits to be pulled in), or not named (it joins as a new
//     member, through the leader);
//   - if any server has a configuration but no cluster ID yet (bootstrapped,
//     no leader ready yet), the node waits: if it is named, the election
//     pulls it in; if not, it joins once the cluster has an ID;
//   - otherwise every server answering is unconfigured; when exactly N
//     distinct ones (by node ID, the node included) answer with the same N,
//     the node bootstraps Raft with all N as voters, sorted by ID. Every
//     node that bootstraps does so with the same configuration, so Raft's
//     election makes one leader of one cluster.
//
// A node never bootstraps with fewer than N servers, nor once any server
// it reaches has a configuration.

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
	// Replayed reports that the server has applied the log it restarted
	// with, or had never applied a cluster ID before it restarted: until
	// then its cluster ID and recorded addresses may be missing, and
	// formation does not count its report. (A server that bootstrapped and
	// restarted before any election has nothing applied to wait for: it
	// counts at once, or formation would wait for it forever.)
	Replayed bool
}

// FormingMember is a server of a configuration and the client address the
// cluster recorded for it ("" until the member recorded it).
type FormingMember struct {
	ID, RaftAddr, ClientAddr string
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
	// FormDone: the node has a configuration.
	FormDone
)

// FormDecision is DecideFormation's answer.
type FormDecision struct {
	Step FormStep
	// Vote reports that the node never ran as a member of the clusters it
	// reached, so it may vote (Node.AllowVotes): it bootstraps, joins, is
	// named in a configuration without a recorded address, or has one.
	Vote bool
	// Servers is the configuration to bootstrap with (FormBootstrap).
	Servers []FormingReport
	// Why says what the decision rests on, for the log.
	Why string
	// Err, if set, stops the node (ErrLostMember).
	Err error
}

// DecideFormation decides formation's next step for self, a node expecting
// self.Expect servers, from the reports of the servers it reached (self may
// be among them; a node is known by its ID). It is a pure function.
func DecideFormation(self FormingReport, reports []FormingReport) FormDecision {
	peers := map[string]FormingReport{}
	for _, r := range reports {
		if r.ID != "" && r.ID != self.ID && r.Replayed {
			peers[r.ID] = r
		}
	}
	ids := make([]string, 0, len(peers))
	for id := range peers {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	// A recorded address was recorded by an earlier run of this node (a
	// node started without state records its own only when formation
	// ends): it ran as a member and lost its state, whether or not a
	// leader has reached it since.
	for _, id := range ids {
		r := peers[id]
		if r.ClusterID == "" {
			continue
		}
		for _, m := range r.Members {
			if m.ID == self.ID && m.ClientAddr != "" {
				return FormDecision{Step: FormWait, Err: fmt.Errorf("%w: %q is a member of cluster %s (as %s says), with a recorded client address, and this data directory has no Raft state (its state was lost?): remove it first (FENCE.REMOVE %s through any member), then start it again; see docs/operations.md", ErrLostMember, self.ID, r.ClusterID, id, self.ID)}
			}
		}
	}
	if len(self.Members) > 0 {
		return FormDecision{Step: FormDone, Vote: true, Why: "this node has a Raft configuration"}
	}
	configured := ""
	for _, id := range ids {
		r := peers[id]
		if r.ClusterID == "" {
			if len(r.Members) > 0 && configured == "" {
				configured = id
			}
			continue
		}
		for _, m := range r.Members {
			if m.ID == self.ID {
				return FormDecision{Step: FormWait, Vote: true, Why: fmt.Sprintf("named in the configuration of cluster %s (as %s says): waiting for its leader", r.ClusterID, id)}
			}
		}
		return FormDecision{Step: FormJoin, Vote: true, Why: fmt.Sprintf("%s belongs to cluster %s, which does not name this node", id, r.ClusterID)}
	}
	if configured != "" {
		named := false
		for _, m := range peers[configured].Members {
			named = named || m.ID == self.ID
		}
		return FormDecision{Step: FormWait, Vote: named, Why: configured + " has a configuration and its cluster no ID yet: waiting for its election"}
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
	return FormDecision{Step: FormBootstrap, Vote: true, Servers: servers, Why: fmt.Sprintf("all %d servers reached", self.Expect)}
}

// FormingReport returns this node's report, from its own state only (no
// round trip: it answers before any leader exists).
func (n *Node) FormingReport() FormingReport {
	r := FormingReport{ID: n.id, RaftAddr: n.RaftAddr(), Expect: n.cfg.BootstrapExpect, ClusterID: n.table.ClusterID(),
		Replayed: n.openedID == "" || n.raft.AppliedIndex() >= n.openedIndex}
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return r
	}
	addrs := n.table.Members()
	for _, s := range f.Configuration().Servers {
		r.Members = append(r.Members, FormingMember{ID: string(s.ID), RaftAddr: string(s.Address), ClientAddr: addrs[string(s.ID)]})
	}
	return r
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
