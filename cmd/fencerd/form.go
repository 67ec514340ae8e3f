package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/fencerlock/fencer/redisbridge"
	"github.com/fencerlock/fencer/server"
)

// formRetry is the pause between formation's rounds of asking the --join
// addresses (server/form.go). Each round resolves the names again, so a
// name that resolves late (a DNS record made as its pod starts) is found.
const formRetry = 500 * time.Millisecond

// checkFormation is CheckJoin with --bootstrap-expect: one round of asking
// the --join addresses, before Raft starts, refusing a node that ran as a
// member of a cluster that formed and lost its state. It never waits for a
// leader: the others may be forming too.
func checkFormation(ctx context.Context, c *config, logger *slog.Logger) func(id string) error {
	return func(id string) error {
		user, pass := forwardCredentials(c.bridge)
		self := server.FormingReport{ID: id, Expect: c.node.BootstrapExpect}
		reports := redisbridge.Survey(ctx, c.join, user, pass, c.bridge.ForwardTLS, logger)
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
	user, pass := forwardCredentials(c.bridge)
	join := func() {
		if err := redisbridge.JoinClusterAs(ctx, c.join, node.ID(), node.RaftAddr(), c.node.ClientAddr, user, pass, c.bridge.ForwardTLS, logger); err != nil {
			logger.Warn("gave up recording this node with the cluster", "err", err)
		}
	}
	go func() {
		last := ""
		for {
			d := server.DecideFormation(node.FormingReport(), redisbridge.Survey(ctx, c.join, user, pass, c.bridge.ForwardTLS, logger))
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
