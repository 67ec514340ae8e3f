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
		Long:  benchHelp(),
		Args:  args(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			wls := benchList(workloads)
			counts, err := benchCounts(clients)
			if err != nil {
				return usage("--clients: %v", err)
			}
			for _, wl := range wls {
				if _, ok := bench.LookupWorkload(wl); !ok {
					return usage("--workload: %v", bench.UnknownWorkload(wl))
				}
			}
			if cfg.Duration <= 0 || cfg.Warmup < 0 || cfg.TTL <= 0 || cfg.OpTimeout <= 0 || cfg.Keys < 0 || cfg.Permits < 0 {
				return usage("--duration, --ttl and --op-timeout must be positive, --warmup, --keys and --permits not negative")
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
	f.StringVar(&workloads, "workload", bench.Uncontended, strings.Join(bench.WorkloadNames(false), ", ")+" (comma-separated for several)")
	f.StringVar(&clients, "clients", "16", "concurrent clients, one connection each (comma-separated for several)")
	f.IntVar(&cfg.Keys, "keys", 0, "uncontended: names per client; the others: names all clients share (each workload's default: see above)")
	f.IntVar(&cfg.Permits, "permits", 0, "semaphore: each semaphore's permits (default: one per client, so no client waits)")
	f.DurationVar(&cfg.TTL, "ttl", 10*time.Second, "lease TTL of every acquire")
	f.DurationVar(&cfg.Duration, "duration", 10*time.Second, "measured window of each run")
	f.DurationVar(&cfg.Warmup, "warmup", time.Second, "unmeasured warm-up before each run")
	f.DurationVar(&cfg.OpTimeout, "op-timeout", 5*time.Second, "bound on one acquire (its wait included) and one release")
	f.StringVar(&cfg.Target, "target", "fencer", "the target name printed in each line (e.g. fencer-1 for a one-node cluster)")
	return cmd
}

// benchHelp is bench's --help: the workloads come from bench.Workloads.
func benchHelp() string {
	var wl strings.Builder
	for _, w := range bench.Workloads {
		fmt.Fprintf(&wl, "  %-12s %s\n", w.Name, wrap(w.Help, 64, "\n               "))
	}
	return `bench runs a lock workload against the cluster and prints one JSON line per
run (target, workload, clients, ops_per_s, handoffs_per_s, acquire_p50_us,
acquire_p99_us, acquire_p999_us, errors, overlaps, token_regressions, ...),
the schema make bench compares fencer with Redis, Redlock and etcd in. See
docs/performance.md.

Workloads:
` + wl.String() + `
Each client goroutine has its own connection and sends its acquires and
releases over plain RESP, with a fresh owner for every acquire (fencer
refuses an owner's acquire of a key it just released). Client i connects to
the i-th address of --addr, round robin. The harness checks that no two of
its clients ever held a name at once where the workload excludes it
(overlaps) and that each name's tokens only grow (token_regressions); both
must be 0. --workload and --clients take comma-separated lists: one run for
each combination.

The exit status is 1 if a run failed or a check found a violation.`
}

// wrap breaks s into lines of at most width, joined by sep.
func wrap(s string, width int, sep string) string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		if line != "" && len(line)+1+len(w) > width {
			lines, line = append(lines, line), w
			continue
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	return strings.Join(append(lines, line), sep)
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
