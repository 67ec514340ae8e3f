package server

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkMillionLocks fills one real node (raft-wal with fsync, default
// snapshot settings) with a million held locks, then reports the process's
// resident memory, the time of a snapshot, and the time a restart takes
// until the node leads again with every lock. Run it once:
//
//	go test -run '^$' -bench MillionLocks -benchtime 1x ./server
//
// FENCER_SCALE_LOCKS changes the count.
func BenchmarkMillionLocks(b *testing.B) {
	locks := 1000000
	if s := os.Getenv("FENCER_SCALE_LOCKS"); s != "" {
		var err error
		if locks, err = strconv.Atoi(s); err != nil {
			b.Fatal(err)
		}
	}
	// As fencerd runs (cmd/fencerd: defaultGCPercent).
	defer debug.SetGCPercent(debug.SetGCPercent(50))
	dir := b.TempDir()
	n := openNode(b, dir)
	ctx := context.Background()

	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 256 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(locks) {
					return
				}
				k := "lock/" + strconv.FormatInt(i, 10)
				if _, ok, err := n.Acquire(ctx, k, "owner-"+strconv.FormatInt(i, 10), 24*time.Hour, 0); err != nil || !ok {
					b.Errorf("acquire %s: %v %v", k, ok, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if b.Failed() {
		return
	}
	b.ReportMetric(float64(locks)/time.Since(start).Seconds(), "fill_locks/s")
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap_MiB")
	b.ReportMetric(rssMiB(b), "rss_MiB")
	if path := os.Getenv("FENCER_SCALE_HEAPPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.WriteHeapProfile(f); err != nil {
			b.Fatal(err)
		}
		_ = f.Close()
	}

	start = time.Now()
	if err := n.raft.Snapshot().Error(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(time.Since(start).Seconds(), "snapshot_s")
	probe := "lock/" + strconv.Itoa(locks/2)
	before, _, err := n.Status(ctx, probe)
	if err != nil {
		b.Fatal(err)
	}
	if err := n.Close(); err != nil {
		b.Fatal(err)
	}

	start = time.Now()
	n = openNode(b, dir)
	b.ReportMetric(time.Since(start).Seconds(), "restart_s")
	after, held, err := n.Status(ctx, probe)
	if err != nil || !held || after.Token != before.Token || n.table.Len() != locks {
		b.Fatalf("after restart: %s held %v token %d (was %d), %d locks, %v", probe, held, after.Token, before.Token, n.table.Len(), err)
	}
	runtime.GC()
	b.ReportMetric(rssMiB(b), "rss_after_restart_MiB")
}

// rssMiB returns the process's resident set size.
func rssMiB(b *testing.B) float64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for line := range bytes.Lines(status) {
		var kb float64
		if _, err := fmt.Sscanf(string(line), "VmRSS: %f kB", &kb); err == nil {
			return kb / 1024
		}
	}
	b.Fatal("no VmRSS")
	return 0
}
