package main

import (
	"context"
	"log/slog"
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
// state started with --bootstrap-expect: it bootstraps the expected servers
// once it reached all of them, waits to be pulled into a cluster that names
// it, or joins one that formed without it; then it records its client
// address with the leader (FENCE.JOIN, a no-op for a voter otherwise). An
// error that must stop fencerd (server.ErrLostMember) is sent on the
// channel.
func formCluster(ctx context.Context, c *config, node *server.Node, logger *slog.Logger) <-chan error {
	fatal := make(chan error, 1)
	if !node.NeedsJoin() || c.node.BootstrapExpect == 0 {
		return fatal
	}
	j := newJoiner(c, logger)
	join := func() {
		if err := j.join(ctx, node.ID(), node.RaftAddr(), c.node.ClientAddr); err != nil {
			logger.Warn("gave up recording this node with the cluster", "err", err)
		}
	}
	go func() {
		last := ""
		for {
			d := server.DecideFormation(node.FormingReport(), j.survey(ctx))
			if d.Err != nil {
				fatal <- d.Err
				return
			}
			if d.Vote {
				node.AllowVotes()
			}
			if d.Why != last {
				logger.Info("forming", "step", d.Why)
				last = d.Why
			}
			switch d.Step {
			case server.FormDone:
				// A node bootstrapped or pulled in waits for the
				// election before it asks the leader to record it.
				for id, _ := node.Leader(); id == ""; id, _ = node.Leader() {
					select {
					case <-ctx.Done():
						return
					case <-time.After(formRetry):
					}
				}
				join()
				return
			case server.FormJoin:
				join()
				return
			case server.FormBootstrap:
				if err := node.BootstrapWith(d.Servers); err != nil {
					logger.Warn("bootstrap failed", "err", err)
				}
				continue
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

// survey asks every --join address at once for its FENCE.FORMING report
// and returns those that answered; it logs, at debug level, those that did
// not (an address that does not resolve yet or a server not started yet is
// formation's normal state).
func (j *joiner) survey(ctx context.Context) []server.FormingReport {
	cmd := resp.Command("FENCE.FORMING")
	out := make([]*server.FormingReport, len(j.addrs))
	var wg sync.WaitGroup
	for i, addr := range j.addrs {
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
// RESP3 map); unknown keys, which a later version may add, are skipped.
func parseForming(v resp.Value) (server.FormingReport, bool) {
	var r server.FormingReport
	if len(v.Elems)%2 != 0 {
		return r, false
	}
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
				r.Members = append(r.Members, server.FormingMember{ID: m.Elems[0].Str, RaftAddr: m.Elems[1].Str, ClientAddr: m.Elems[2].Str})
			}
		}
	}
	return r, r.ID != "" && r.RaftAddr != ""
}
