package main

import (
	"encoding/json"
	"fmt"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fencerlock/fencer/internal/bench"
	"github.com/spf13/cobra"
)

func (a *app) benchCommand() *cobra.Command {
	var (
		workloads, clients string
		cfg                bench.Config
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure the cluster's lock throughput and latency",
		Long: `bench runs a lock workload against the cluster and prints one JSON line per
run, in the schema of shared/peerbench (target, workload, clients, ops_per_s,
handoffs_per_s, acquire_p50_us, acquire_p99_us, acquire_p999_us, errors,
overlaps, token_regressions, ...), so that its lines and the peers' can be
compared directly. See docs/performance.md.

Workloads:
  uncontended  each client acquires and releases its own --keys names in turn
               (default 8 names per client)
  contended    all clients compete for --keys names (default 1), queueing on
               the server (FENCE.ACQUIRE ... WAIT) while another holds one;
               handoffs_per_s counts grants whose previous holder was another
               client

Each client goroutine has its own connection and sends FENCE.ACQUIRE and
FENCE.RELEASE over plain RESP, with a fresh owner for every acquire (fencer
refuses an owner's acquire of a key it just released). Client i connects to
the i-th address of --addr, round robin. The harness checks that no two of
its clients ever held a name at once (overlaps) and that each name's tokens
only grow (token_regressions); both must be 0. --workload and --clients take
comma-separated lists: one run for each combination.

The exit status is 1 if a run failed or a check found a violation.`,
		Args: args(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			wls := benchList(workloads)
			counts, err := benchCounts(clients)
			if err != nil {
				return usage("--clients: %v", err)
			}
			for _, wl := range wls {
				if wl != bench.Uncontended && wl != bench.Contended {
					return usage("--workload: %q is neither %s nor %s", wl, bench.Uncontended, bench.Contended)
				}
			}
			if cfg.Duration <= 0 || cfg.Warmup < 0 || cfg.TTL <= 0 || cfg.OpTimeout <= 0 || cfg.Keys < 0 {
				return usage("--duration, --ttl and --op-timeout must be positive, --warmup and --keys not negative")
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			failed := 0
			enc := json.NewEncoder(a.stdout)
			for _, wl := range wls {
				for _, n := range counts {
					c := cfg
					c.Addrs, c.Workload, c.Clients = a.addrs, wl, n
					res := bench.Run(ctx, c)
					if err := enc.Encode(res); err != nil {
						return err
					}
					if res.Error != "" || res.Overlaps > 0 || res.TokenRegressions > 0 {
						failed++
					}
					if ctx.Err() != nil {
						return fmt.Errorf("interrupted")
					}
				}
			}
			if failed > 0 {
				return fmt.Errorf("%d run(s) failed or found a violation", failed)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&workloads, "workload", bench.Uncontended, "uncontended or contended (comma-separated for several)")
	f.StringVar(&clients, "clients", "16", "concurrent clients, one connection each (comma-separated for several)")
	f.IntVar(&cfg.Keys, "keys", 0, "contended: names all clients compete for (default 1); uncontended: names per client (default 8)")
	f.DurationVar(&cfg.TTL, "ttl", 10*time.Second, "lease TTL of every acquire")
	f.DurationVar(&cfg.Duration, "duration", 10*time.Second, "measured window of each run")
	f.DurationVar(&cfg.Warmup, "warmup", time.Second, "unmeasured warm-up before each run")
	f.DurationVar(&cfg.OpTimeout, "op-timeout", 5*time.Second, "bound on one acquire (its wait included) and one release")
	f.StringVar(&cfg.Target, "target", "fencer", "the target name printed in each line (e.g. fencer-1 for a one-node cluster)")
	return cmd
}

func benchList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func benchCounts(s string) ([]int, error) {
	var out []int
	for _, p := range benchList(s) {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive number", p)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("none given")
	}
	return out, nil
}
