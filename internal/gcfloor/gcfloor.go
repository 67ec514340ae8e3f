// Package gcfloor keeps the Go garbage collector's heap goal from falling
// below a floor.
//
// With the default GOGC=100 the collector runs whenever the heap doubles.
// fencerd's live heap is small (a few MiB plus its locks) while every request
// allocates, so under load it collected dozens of times a second, and each
// cycle's mark workers took CPU from the requests. Raising GOGC while the
// live heap is small makes the goal the floor instead; once the live heap is
// half the floor or more, GOGC is the default again, so a large lock table
// costs what it did.
package gcfloor

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// defaultPercent is GOGC's default.
const defaultPercent = 100

// Keep keeps the heap goal at floor bytes or more until stop is called
// (which sets GOGC back to the default). It does nothing, and stop nothing,
// if floor is 0 or the GOGC environment variable is set: the operator's
// choice stands.
func Keep(floor uint64) (stop func()) {
	if floor == 0 || os.Getenv("GOGC") != "" {
		return func() {}
	}
	t := &tuner{floor: floor, percent: defaultPercent, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	t.adjust()
	t.arm()
	return t.stop
}

type tuner struct {
	floor uint64

	mu      sync.Mutex
	stopped bool
	percent int
	sample  []metrics.Sample
}

// arm runs adjust after the next collection (when a fresh object becomes
// unreachable), and arms again.
func (t *tuner) arm() {
	runtime.AddCleanup(new([16]byte), func(t *tuner) {
		if t.adjust() {
			t.arm()
		}
	}, t)
}

// adjust sets GOGC from the live heap the last collection found; it reports
// false once stopped.
func (t *tuner) adjust() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return false
	}
	metrics.Read(t.sample)
	live := t.sample[0].Value.Uint64()
	p := percentFor(t.floor, live)
	// Small changes are not worth a call (it takes the heap lock).
	if p != t.percent && (p > t.percent*21/20 || p < t.percent*19/20 || p == defaultPercent) {
		debug.SetGCPercent(p)
		t.percent = p
	}
	return true
}

func (t *tuner) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.stopped {
		t.stopped = true
		debug.SetGCPercent(defaultPercent)
	}
}

// percentFor is the GOGC that makes the goal (live × (1 + GOGC/100)) the
// floor, and never less than the default.
func percentFor(floor, live uint64) int {
	if live == 0 {
		live = 1 << 20
	}
	if floor <= 2*live {
		return defaultPercent
	}
	p := floor/live*100 - 100 + (floor%live)*100/live
	if p > 1<<20 {
		p = 1 << 20
	}
	return int(p)
}
