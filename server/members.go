package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"time"

	"github.com/fencerlock/fencer/fsm"
	"github.com/hashicorp/raft"
)

// Member is one server of the cluster.
type Member struct {
	ID         string
	RaftAddr   string
	ClientAddr string // empty until the member has recorded it
	// Role is "leader", "follower" (a voter) or "nonvoter".
	Role string
}

// Members lists the cluster's servers as this node's Raft configuration
// knows them, sorted by ID. A leader first commits what it appended
// (Barrier), so that it does not list a change that may never commit: a
// node about to join asks the leader whether its ID is still a member.
func (n *Node) Members(ctx context.Context) ([]Member, error) {
	if n.raft.State() == raft.Leader {
		if err := n.await(ctx, func() raft.Future { return n.raft.Barrier(0) }, uncertain); err != nil {
			return nil, err
		}
	}
	return n.configuredMembers(ctx)
}

// configuredMembers lists the servers of this node's latest Raft
// configuration, committed or not, sorted by ID.
func (n *Node) configuredMembers(ctx context.Context) ([]Member, error) {
	var f raft.ConfigurationFuture
	if err := n.await(ctx, func() raft.Future { f = n.raft.GetConfiguration(); return f }, contextErr); err != nil {
		return nil, err
	}
	_, leader := n.raft.LeaderWithID()
	addrs := n.table.Members()
	var out []Member
	for _, s := range f.Configuration().Servers {
		m := Member{ID: string(s.ID), RaftAddr: string(s.Address), ClientAddr: addrs[string(s.ID)], Role: "follower"}
		if string(s.ID) == n.id {
			m.ClientAddr = n.cfg.ClientAddr
		}
		switch {
		case s.ID == leader:
			m.Role = "leader"
		case s.Suffrage != raft.Voter:
			m.Role = "nonvoter"
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Join adds (or updates) a voting member that runs this build, as
// JoinReading does.
func (n *Node) Join(ctx context.Context, id, raftAddr, clientAddr string) error {
	return n.JoinReading(ctx, id, raftAddr, clientAddr, fsm.FormatReadable)
}

// JoinReading adds (or updates) a voting member whose build reads format
// levels up to readable, recording its client address before it adds it.
// A server that cannot read the cluster's format level in use is refused
// (ErrFormatRefused), and nothing changes; a raise of the level waits for
// the join, and the join for the raise (format.go). It runs on the
// leader; elsewhere it returns a *NotLeaderError. Joining again with the
// same addresses is a no-op, so a node may retry its join until it
// succeeds.
func (n *Node) JoinReading(ctx context.Context, id, raftAddr, clientAddr string, readable uint64) error {
	if id == "" {
		return invalid("id", "empty")
	}
	for _, a := range []string{raftAddr, clientAddr} {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return invalid("address", "%q: %v", a, err)
		}
	}
	if err := n.waitReady(ctx); err != nil {
		return err
	}
	n.format.mu.Lock()
	locked := true
	defer func() {
		if locked {
			n.health.forget(id)
			n.format.mu.Unlock()
		}
	}()
	term, ok := n.grants.readyTerm()
	if !ok {
		return n.notLeader()
	}
	if err := n.checkJoinFormat(id, readable); err != nil {
		return err
	}
	// What it answered before (as a member removed since, or before a
	// restart on another build) says nothing of what it runs now: a
	// raise waits for its next answer. Forgotten again once the join is
	// done (before the gate opens): a probe that read the member's
	// address before the change may ask the process that held the ID.
	n.health.forget(id)
	conf, err := n.leaderConfiguration(ctx)
	if err != nil {
		return err
	}
	present := false
	for _, s := range conf.Servers {
		if s.ID == raft.ServerID(id) && n.table.Removed(id) {
			// Its removal was cut short: recording an address would make
			// it look like a member again (DecideFormation).
			return fmt.Errorf("%w: %q was removed, but its removal did not finish: remove it again (FENCE.REMOVE %s)", ErrLostMember, id, id)
		}
		if s.ID == raft.ServerID(id) && s.Address == raft.ServerAddress(raftAddr) && s.Suffrage == raft.Voter {
			present = true
		}
	}
	// Its address is recorded first: no voter ever exists without a record
	// (recordVoters), so one that loses its state is known to have run.
	if rec, _ := n.table.Recorded(id); rec != clientAddr {
		if _, err := n.propose(ctx, fsm.Command{Op: fsm.OpMember, Key: id, Owner: clientAddr}); err != nil {
			return err
		}
	}
	if faultPoint("join-cut-short", id) {
		return fmt.Errorf("%w: %q's join cut short by a test", ErrUnknownOutcome, id)
	}
	if !present {
		// A test may move leadership here (faults_enabled.go). A raise
		// committed by another leader since the check makes the check
		// stale: this node must still be ready in the term it checked in.
		faultPoint(pointJoinFormat, id)
		if t, ok := n.grants.readyTerm(); !ok || t != term {
			return n.notLeader()
		}
		// The gate stays held until Raft is done with the change, even
		// if ctx ends first: a raise must not be decided while it may
		// still add this server.
		ch := make(chan error, 1)
		go func() { ch <- n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, 0).Error() }()
		select {
		case err := <-ch:
			if err != nil {
				return n.translate(err)
			}
		case <-ctx.Done():
			locked = false
			go func() {
				<-ch
				n.health.forget(id)
				n.format.mu.Unlock()
			}()
			return uncertain(ctx.Err())
		}
		n.log.Info("member added", "id", id, "raft", raftAddr, "client", clientAddr)
	}
	return nil
}

// DefaultLockTTL returns Config.DefaultLockTTL.
func (n *Node) DefaultLockTTL() time.Duration { return n.cfg.DefaultLockTTL }

// PeerAddrs returns the client addresses of the other members as this
// node's applied table records them (a member's address is forgotten when it
// is removed), with no Raft round trip: for what must not wait for one, such
// as relaying a publish to every node.
func (n *Node) PeerAddrs() []string {
	var out []string
	for id, addr := range n.table.Members() {
		if id != n.id && addr != "" {
			out = append(out, addr)
		}
	}
	sort.Strings(out)
	return out
}

// leaderConfiguration waits until this node is a ready leader and returns
// its latest Raft configuration, for a change to it.
func (n *Node) leaderConfiguration(ctx context.Context) (raft.Configuration, error) {
	if err := n.waitReady(ctx); err != nil {
		return raft.Configuration{}, err
	}
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return raft.Configuration{}, n.translate(err)
	}
	return f.Configuration(), nil
}

// Remove takes a member out of the cluster. It runs on the leader.
func (n *Node) Remove(ctx context.Context, id string) error {
	conf, err := n.leaderConfiguration(ctx)
	if err != nil {
		return err
	}
	found := false
	for _, s := range conf.Servers {
		found = found || s.ID == raft.ServerID(id)
	}
	if !found {
		return fmt.Errorf("%w: %q", ErrUnknownMember, id)
	}
	// Replace its address by a tombstone first: once the leader removes
	// itself it can propose nothing more, and a removal cut short between
	// the two leaves a member known to have run, not one that looks as if
	// it never ran (DecideFormation).
	n.health.forget(id)
	if _, err := n.propose(ctx, fsm.Command{Op: fsm.OpMember, Key: id, Owner: fsm.RemovedMember}); err != nil {
		return err
	}
	if faultPoint("remove-cut-short", id) {
		return fmt.Errorf("%w: %q's removal cut short by a test", ErrUnknownOutcome, id)
	}
	if err := n.await(ctx, func() raft.Future { return n.raft.RemoveServer(raft.ServerID(id), 0, 0) }, uncertain); err != nil {
		if !errors.Is(err, ErrUnknownOutcome) {
			// Its address is tombstoned already: never run again elsewhere.
			return fmt.Errorf("%w: %q's address was forgotten, but its removal failed: %v", ErrUnknownOutcome, id, err)
		}
		return err
	}
	n.log.Info("member removed", "id", id)
	return nil
}

// TransferLeadership asks the leader to hand leadership to id, or to the
// most up-to-date follower if id is empty. A transfer that cannot start (to
// the leader itself, to a member that is not a voter, with no other voter, or
// while another transfer runs) did nothing: its error wraps
// ErrTransferRefused and says why, never ErrUnknownOutcome.
func (n *Node) TransferLeadership(ctx context.Context, id string) error {
	conf, err := n.leaderConfiguration(ctx)
	if err != nil {
		return err
	}
	transfer := n.raft.LeadershipTransfer
	if id == "" {
		voters := 0
		for _, m := range conf.Servers {
			if m.Suffrage == raft.Voter && string(m.ID) != n.id {
				voters++
			}
		}
		if voters == 0 {
			return fmt.Errorf("%w: there is no other voter to hand leadership to", ErrTransferRefused)
		}
	} else {
		var target *raft.Server
		for i, m := range conf.Servers {
			if m.ID == raft.ServerID(id) {
				target = &conf.Servers[i]
			}
		}
		switch {
		case target == nil:
			return fmt.Errorf("%w: %q", ErrUnknownMember, id)
		case id == n.id:
			return fmt.Errorf("%w: %q is already the leader", ErrTransferRefused, id)
		case target.Suffrage != raft.Voter:
			return fmt.Errorf("%w: %q is not a voter", ErrTransferRefused, id)
		}
		addr := target.Address
		transfer = func() raft.Future { return n.raft.LeadershipTransferToServer(raft.ServerID(id), addr) }
	}
	if err := n.await(ctx, transfer, uncertain); err != nil {
		return n.refusedTransfer(err)
	}
	return nil
}

// refusedTransfer turns the translated error of a transfer that raft refused
// before starting it into a definite one. raft says so only in words (the
// translation keeps them), checked by TestTransferRefusedIsDefinite against
// the raft version in go.mod.
func (n *Node) refusedTransfer(err error) error {
	why := ""
	switch {
	case strings.Contains(err.Error(), raft.ErrLeadershipTransferInProgress.Error()):
		why = "another leadership transfer is in progress"
	case strings.Contains(err.Error(), "cannot transfer leadership to itself"):
		why = "the target is already the leader"
	case strings.Contains(err.Error(), "cannot find peer"):
		why = "there is no other voter to hand leadership to"
	case strings.Contains(err.Error(), "cannot find replication state"):
		why = "the target is not replicated to by this leader"
	default:
		return err
	}
	return fmt.Errorf("%w: %s", ErrTransferRefused, why)
}

// StateHash returns the index of the last command applied to the table and a SHA-256
// of the lock table's snapshot bytes. Two nodes that applied the same log
// return the same pair; the fault campaign compares them at the end.
func (n *Node) StateHash() (appliedIndex uint64, hash string) {
	var sum [sha256.Size]byte
	n.grants.locked(func() { // no entry is applied meanwhile
		sum = sha256.Sum256(n.table.MarshalSnapshot())
		// The table's own last index, not raft.AppliedIndex(): raft counts
		// an entry applied before the FSM goroutine has applied it.
		appliedIndex = n.table.LastIndex()
	})
	return appliedIndex, hex.EncodeToString(sum[:])
}

// NeedsAddressRecord reports that this node is in its Raft configuration,
// knows a leader other than itself, and the address the cluster recorded
// for it is not its client address (and it is not being removed): fencerd
// then records it through the leader (FENCE.JOIN), on every start. A leader
// records its own (watchLeadership).
func (n *Node) NeedsAddressRecord() bool {
	_, lid := n.raft.LeaderWithID()
	if lid == "" || string(lid) == n.id || n.table.Removed(n.id) || n.table.Members()[n.id] == n.cfg.ClientAddr {
		return false
	}
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == n.id {
			return true
		}
	}
	return false
}

// recordVoters commits fsm.RanMember for every server of the leader's
// configuration that has no record yet (no client address, no marker, no
// tombstone). A new leader calls it after its Barrier and before it is
// ready: every grant then comes after the records in the log, so a grant
// that committed implies committed records of all the voters that could
// have acknowledged it, and a voter that loses its state is refused by
// formation rather than taken for one that never ran (docs/safety.md,
// "What marks a member that ran"). The first leader of a cluster records
// all the servers of its first configuration; the first leader of a
// cluster made by an earlier build records the members it never recorded.
// The configuration cannot change meanwhile: a change needs a ready
// leader, and the Barrier committed the changes of earlier terms. It
// reports false if leadership was lost in term.
func (n *Node) recordVoters(term uint64) bool {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		n.log.Warn("could not read the configuration to record its voters", "err", err)
		return false
	}
	for _, s := range f.Configuration().Servers {
		id := string(s.ID)
		if _, ok := n.table.Recorded(id); ok {
			continue
		}
		c := fsm.Command{Op: fsm.OpMember, Key: id, Owner: fsm.RanMember}
		if err := n.raft.Apply(c.Encode(nil), 0).Error(); err != nil {
			n.log.Warn("could not record a voter as having run; the next leader will", "id", id, "err", err)
			return false
		}
		n.log.Info("recorded a voter as having run", "id", id, "term", term)
	}
	return true
}
