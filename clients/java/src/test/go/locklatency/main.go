// Command locklatency measures a lock/unlock pair through the Go client
// (TryAcquire, then Release, on one lock), for the Java client's benchmark
// (clients/java BenchTest, make bench-java), which runs it against the same
// fencerd in the same run as its own loop.
//
// Usage: locklatency ADDR PAIRS
package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"time"

	"github.com/fencerlock/fencer/client"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: locklatency ADDR PAIRS")
		os.Exit(2)
	}
	pairs, err := strconv.Atoi(os.Args[2])
	if err != nil || pairs < 1 {
		fmt.Fprintln(os.Stderr, "locklatency: PAIRS must be a positive integer")
		os.Exit(2)
	}
	c, err := client.New([]string{os.Args[1]})
	if err != nil {
		fmt.Fprintln(os.Stderr, "locklatency:", err)
		os.Exit(1)
	}
	defer c.Close()
	ctx := context.Background()
	pair := func() time.Duration {
		t0 := time.Now()
		l, err := c.TryAcquire(ctx, "bench/go", client.WithTTL(10*time.Second))
		if err != nil {
			fmt.Fprintln(os.Stderr, "locklatency:", err)
			os.Exit(1)
		}
		if err := l.Release(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "locklatency:", err)
			os.Exit(1)
		}
		return time.Since(t0)
	}
	for i := 0; i < pairs/10; i++ { // warm up: connections, the server's caches
		pair()
	}
	d := make([]time.Duration, pairs)
	var sum time.Duration
	for i := range d {
		d[i] = pair()
		sum += d[i]
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	us := func(x time.Duration) float64 { return float64(x.Nanoseconds()) / 1e3 }
	fmt.Printf("go %d %.0f %.0f %.0f\n", pairs, us(sum/time.Duration(pairs)), us(d[pairs/2]), us(d[pairs*99/100]))
}
