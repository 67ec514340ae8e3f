// Command redsyncbench measures go-redsync/redsync's uncontended lock rate:
// each of -c clients locks and unlocks a mutex of its own (SET NX PX, then
// the release script by EVALSHA) for -d, after a warm-up, and the rate of
// lock/unlock pairs is printed as one line.
//
// Against a running server (fencer, or Redis):
//
//	redsyncbench -addr 127.0.0.1:7379 -c 16
//
// To compare fencerd builds (docs/performance.md): -compare names the
// binaries, each started in turn as a fresh -nodes cluster on loopback (the
// clients talk to its leader) for every one of -rounds rounds, and the
// medians are printed with their ratio to the first binary's.
//
//	redsyncbench -compare /tmp/fencerd-before,bin/fencerd -rounds 8
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fencerlock/fencer/internal/bench"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:7379", "RESP address (without -compare)")
	clients := flag.Int("c", 16, "clients, each with a mutex of its own")
	dur := flag.Duration("d", 5*time.Second, "measured time")
	warm := flag.Duration("warmup", time.Second, "time before the measurement")
	compare := flag.String("compare", "", "fencerd binaries to start and compare, comma-separated")
	rounds := flag.Int("rounds", 6, "with -compare: runs of each binary, alternating")
	nodes := flag.Int("nodes", 1, "with -compare: nodes in each cluster")
	flag.Parse()
	if *compare == "" {
		rate, errs := measure(*addr, *clients, *warm, *dur)
		fmt.Printf("clients %d pairs/s %.0f errors %d\n", *clients, rate, errs)
		if errs > 0 {
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := compareBuilds(ctx, strings.Split(*compare, ","), *rounds, *nodes, *clients, *warm, *dur); err != nil {
		fmt.Fprintln(os.Stderr, "redsyncbench:", err)
		os.Exit(1)
	}
}

// measure runs the clients against addr and returns the pairs per second
// of the measured window and the errors in it.
func measure(addr string, clients int, warm, dur time.Duration) (float64, int64) {
	rc := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 2 * clients, DisableIdentity: true})
	defer rc.Close()
	rs := redsync.New(goredis.NewPool(rc))
	var pairs, errs atomic.Int64
	var measuring atomic.Bool
	start := time.Now()
	end := start.Add(warm + dur)
	time.AfterFunc(warm, func() { measuring.Store(true) })
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := rs.NewMutex(fmt.Sprintf("redsyncbench-%d", i), redsync.WithExpiry(10*time.Second), redsync.WithTries(1))
			for time.Now().Before(end) {
				err := m.LockContext(context.Background())
				if err == nil {
					var ok bool
					ok, err = m.UnlockContext(context.Background())
					if err == nil && !ok {
						err = fmt.Errorf("unlock answered false")
					}
				}
				switch {
				case !measuring.Load():
				case err != nil:
					errs.Add(1)
				default:
					pairs.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return float64(pairs.Load()) / dur.Seconds(), errs.Load()
}

// compareBuilds measures each binary rounds times, alternating, each run on
// a fresh cluster, and prints every run and then the medians.
func compareBuilds(ctx context.Context, bins []string, rounds, nodes, clients int, warm, dur time.Duration) error {
	procs := &bench.Procs{}
	defer procs.StopAll(bench.StopGrace)
	rates := make([][]float64, len(bins))
	for r := 1; r <= rounds; r++ {
		for i, bin := range bins {
			rate, err := runOnce(ctx, procs, bin, nodes, clients, warm, dur)
			if err != nil {
				return fmt.Errorf("%s: %w", bin, err)
			}
			rates[i] = append(rates[i], rate)
			fmt.Printf("round %d %s nodes %d clients %d pairs/s %.0f\n", r, bin, nodes, clients, rate)
		}
	}
	first := median(rates[0])
	for i, bin := range bins {
		m := median(rates[i])
		fmt.Printf("median %s nodes %d clients %d pairs/s %.0f ratio %.3f (runs %v)\n", bin, nodes, clients, m, m/first, rounded(rates[i]))
	}
	return nil
}

func runOnce(ctx context.Context, procs *bench.Procs, bin string, nodes, clients int, warm, dur time.Duration) (float64, error) {
	dir, err := os.MkdirTemp(os.Getenv("BASE_DIR"), "redsyncbench-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	abs, err := filepath.Abs(bin)
	if err != nil {
		return 0, err
	}
	c, err := bench.StartFencer(ctx, procs, abs, dir, nodes)
	if err != nil {
		return 0, err
	}
	defer c.Stop()
	leader, err := bench.LeaderAddr(c.Nodes[0].Addr)
	if err != nil {
		return 0, err
	}
	rate, errs := measure(leader, clients, warm, dur)
	if errs > 0 {
		return 0, fmt.Errorf("%d errors", errs)
	}
	return rate, nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func rounded(xs []float64) []int {
	out := make([]int, len(xs))
	for i, x := range xs {
		out[i] = int(x + 0.5)
	}
	return out
}
