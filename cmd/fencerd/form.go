package main

import (
	"context"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/fencerlock/fencer/internal/resp"
	"github.com/fencerlock/fencer/server"
)

// formRetry is the pause between formation's rounds of asking the --join
// addresses (server/form.go). Each round resolves the names again, so a
// name that resolves late (a DNS record made as its pod starts) is found.
const formRetry = 500 * time.Millisecond

// formingTimeout bounds one FENCE.FORMING round trip.
const formingTimeout = 2 * time.Second

// checkFormation is CheckJoin with --bootstrap-expect: one round of asking
// the --join addresses, before Raft starts, refusing a node that ran as a
// member of a cluster that formed and lost its state. It never waits for a
// leader: the others may be forming too.
func checkFormation(ctx context.Context, c *config, logger *slog.Logger) func(id string) error {
	return func(id string) error {
		self := server.FormingReport{ID: id, Expect: c.node.BootstrapExpect}
		reports := newJoiner(c, logger).survey(ctx)
		return server.DecideFormation(self, reports).Err
	}
}

// formCluster runs formation in the background for a node without Raft
// state started with --bootstrap-expect, while its gate (server/votegate.go)
// keeps Raft from voting or taking anything: it bootstraps the expected
// servers once it reached all of them without state (each having seen the
// same ones), joins a cluster that formed without it, or opens the gate
// once the other servers of a first configuration vouch that it never ran;
// otherwise it waits, saying why. recordAddress records the client address afterwards. An error that
// must stop fencerd (server.ErrLostMember, server.ErrTwoClusters) is sent on
// the channel.
func formCluster(ctx context.Context, c *config, node *server.Node, logger *slog.Logger) <-chan error {
	fatal := make(chan error, 1)
	if !node.NeedsJoin() || c.node.BootstrapExpect == 0 {
		return fatal
	}
	j := newJoiner(c, logger)
	go func() {
		last := ""
		for !node.Voting() {
			reports := j.survey(ctx)
			d := server.DecideFormation(node.FormingReport(), reports)
			node.SetFormingSeen(reports)
			if d.Err != nil {
				fatal <- d.Err
				return
			}
			if d.Why != last {
				logger.Info("forming", "step", d.Why, "voting", d.Vote)
				last = d.Why
			}
			switch {
			case d.Step == server.FormBootstrap:
				node.AllowVotes()
				if err := node.BootstrapWith(d.Servers); err != nil {
					logger.Warn("bootstrap failed", "err", err)
				}
			case d.Step == server.FormJoin:
				// Open first: a leader whose configuration needs this
				// node's acknowledgement to commit the join (a cluster of
				// one) must reach it.
				node.AllowVotes()
				if err := j.join(ctx, node.ID(), node.RaftAddr(), c.node.ClientAddr); err != nil {
					logger.Warn("gave up joining", "err", err)
				}
			case d.Vote:
				node.AllowVotes()
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(formRetry):
			}
		}
	}()
	return fatal
}

// recordRetry is the pause between recordAddress's checks, recordBackoff
// the one after a round of failed attempts.
const (
	recordRetry   = time.Second
	recordBackoff = 30 * time.Second
)

// recordAddress records this node's client address with the cluster's
// leader (FENCE.JOIN, a no-op for the configuration) once a leader other
// than itself is known and the recorded address is not its own, on every
// start: it is the one clients are redirected to, and it replaces the
// record a leader made of the member (fsm.RanMember) before it granted
// anything; that record, not this one, is what tells formation it ran. A leader records
// its own. It asks the leader's recorded address, then the --join ones.
func recordAddress(ctx context.Context, c *config, node *server.Node, logger *slog.Logger) {
	j := newJoiner(c, logger)
	addrs := j.addrs
	go func() {
		for {
			wait := recordRetry
			if node.NeedsAddressRecord() {
				_, leader := node.Leader()
				j.addrs = addrs
				if leader != "" {
					j.addrs = append([]string{leader}, addrs...)
				}
				if len(j.addrs) > 0 {
					jctx, cancel := context.WithTimeout(ctx, 2*joinTimeout)
					err := j.join(jctx, node.ID(), node.RaftAddr(), c.node.ClientAddr)
					cancel()
					if err == nil {
						logger.Info("recorded this node's client address with the cluster", "client", c.node.ClientAddr)
					} else {
						// (join warned of every attempt.)
						wait = recordBackoff
					}
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
	}()
}

// survey asks every --join address at once for its FENCE.FORMING report
// and returns those that answered; it logs, at debug level, those that did
// not (an address that does not resolve yet or a server not started yet is
// formation's normal state). If none answered as the leader but some named
// a leader's client address outside the list, it asks those too: only a
// leader's word lets a node join or vote (server/form.go), and a --join
// list need not hold the leader.
func (j *joiner) survey(ctx context.Context) []server.FormingReport {
	reps := j.ask(ctx, j.addrs)
	asked := map[string]bool{}
	for _, a := range j.addrs {
		asked[a] = true
	}
	var more []string
	for _, r := range reps {
		if r.Leader {
			return reps
		}
		if r.LeaderAddr != "" && !asked[r.LeaderAddr] {
			asked[r.LeaderAddr] = true
			more = append(more, r.LeaderAddr)
		}
	}
	return append(reps, j.ask(ctx, more)...)
}

// ask asks every address in addrs at once for its FENCE.FORMING report.
func (j *joiner) ask(ctx context.Context, addrs []string) []server.FormingReport {
	cmd := resp.Command("FENCE.FORMING")
	out := make([]*server.FormingReport, len(addrs))
	var wg sync.WaitGroup
	for i, addr := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := j.roundTrip(ctx, addr, cmd, formingTimeout)
			if err == nil && v.Kind == resp.Error {
				j.log.Debug("FENCE.FORMING refused", "via", addr, "reply", v.Str)
				return
			}
			if err != nil {
				j.log.Debug("FENCE.FORMING failed", "via", addr, "err", err)
				return
			}
			rep, ok := parseForming(v)
			if !ok {
				j.log.Debug("FENCE.FORMING: unexpected reply", "via", addr)
				return
			}
			rep.Via = addr
			out[i] = &rep
		}()
	}
	wg.Wait()
	var reps []server.FormingReport
	for _, r := range out {
		if r != nil {
			reps = append(reps, *r)
		}
	}
	return reps
}

// parseForming reads a FENCE.FORMING reply (a RESP2 array of pairs, or a
// RESP3 map); unknown keys, which a later version may add, are skipped. A
// server that does not say how long its log is (an earlier build) is taken
// to have state and entries past the bootstrap: what it leaves out never
// counts as evidence.
func parseForming(v resp.Value) (server.FormingReport, bool) {
	r := server.FormingReport{HasState: true, LastIndex: math.MaxUint64}
	if len(v.Elems)%2 != 0 {
		return r, false
	}
	told := false
	for i := 0; i < len(v.Elems); i += 2 {
		val := v.Elems[i+1]
		switch v.Elems[i].Str {
		case "id":
			r.ID = val.Str
		case "raft_addr":
			r.RaftAddr = val.Str
		case "cluster_id":
			r.ClusterID = val.Str
		case "replayed":
			r.Replayed = val.Kind == resp.Integer && val.Int == 1
		case "has_state":
			r.HasState = val.Kind == resp.Integer && val.Int == 1
		case "leader":
			r.Leader = val.Kind == resp.Integer && val.Int == 1
		case "leader_addr":
			r.LeaderAddr = val.Str
		case "seen":
			for _, e := range val.Elems {
				r.Seen = append(r.Seen, e.Str)
			}
		case "last_index":
			if val.Kind != resp.Integer || val.Int < 0 {
				return r, false
			}
			r.LastIndex, told = uint64(val.Int), true
		case "expect":
			n, err := strconv.Atoi(val.Str)
			if val.Kind == resp.Integer {
				n, err = int(val.Int), nil
			}
			if err != nil {
				return r, false
			}
			r.Expect = n
		case "members":
			for _, m := range val.Elems {
				if len(m.Elems) < 3 {
					return r, false
				}
				fm := server.FormingMember{ID: m.Elems[0].Str, RaftAddr: m.Elems[1].Str, ClientAddr: m.Elems[2].Str}
				fm.Removed = len(m.Elems) > 3 && m.Elems[3].Kind == resp.Integer && m.Elems[3].Int == 1
				fm.Ran = len(m.Elems) > 4 && m.Elems[4].Kind == resp.Integer && m.Elems[4].Int == 1
				r.Members = append(r.Members, fm)
			}
		}
	}
	if !told {
		r.HasState, r.LastIndex = true, math.MaxUint64
	}
	return r, r.ID != "" && r.RaftAddr != ""
}
