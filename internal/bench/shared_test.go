package bench

import (
	"context"
	"testing"
	"time"
)

func TestSharedWorkloadsAgainstFencerd(t *testing.T) {
	t.Parallel()
	c := startFencer(t, 1)
	for _, cfg := range []Config{
		{Workload: ReadShared, Clients: 4, Keys: 2},
		{Workload: Semaphore, Clients: 4},
		// Fewer permits than clients: they queue with WAIT, and the
		// harness counts a fourth holder of three permits as an overlap.
		{Workload: Semaphore, Clients: 4, Permits: 3},
	} {
		cfg.Addrs, cfg.Target, cfg.Duration, cfg.Warmup = c.Addrs(), "fencer-1", 700*time.Millisecond, 200*time.Millisecond
		r := Run(context.Background(), cfg)
		checkClean(t, r)
		if r.Workload != cfg.Workload || r.Clients != 4 || r.Keys != max(cfg.Keys, 1) {
			t.Errorf("result header %+v", r)
		}
		if r.Ops < 8 {
			t.Errorf("%s: only %d pairs in the window", cfg.Workload, r.Ops)
		}
	}
}

func TestSharedConfigErrors(t *testing.T) {
	for _, cfg := range []Config{
		{Addrs: []string{"x"}, Workload: Semaphore, Clients: 1, Permits: maxPermits + 1, Duration: time.Second},
		{Addrs: []string{"x"}, Workload: Semaphore, Clients: 1, Permits: -1, Duration: time.Second},
	} {
		if r := Run(context.Background(), cfg); r.Error == "" {
			t.Errorf("Run(%+v) ran", cfg)
		}
	}
}
