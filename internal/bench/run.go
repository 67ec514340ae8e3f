package bench

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Config describes one lock run.
type Config struct {
	// Addrs are the RESP addresses of the cluster; client i connects to
	// Addrs[i % len(Addrs)].
	Addrs []string
	// Target is the name printed in the result ("fencer", "fencer-1").
	Target string
	// Workload is the name of one of Workloads.
	Workload string
	// Clients is the number of client goroutines, one connection each.
	Clients int
	// Keys is, for Contended, the number of names all clients compete for
	// (default 1); for Uncontended, the names each client cycles through
	// (default 8, peerbench's -names-per-client); for ReadShared, the
	// names all clients cycle through (default 8); for Semaphore, the
	// semaphores (default 1).
	Keys int
	// Permits is, for Semaphore, each semaphore's permits. The default is
	// Clients: no client waits. With fewer, clients queue with WAIT.
	Permits int
	// TTL is every lease's TTL. The default is 10s.
	TTL time.Duration
	// Warmup runs before the measured window, Duration is the window.
	Warmup, Duration time.Duration
	// OpTimeout bounds one acquire (its wait included) and one release.
	// The default is 5s.
	OpTimeout time.Duration
}

func (c *Config) setDefaults() error {
	if len(c.Addrs) == 0 {
		return errors.New("bench: no address")
	}
	wl, ok := LookupWorkload(c.Workload)
	if !ok {
		return fmt.Errorf("bench: %w", UnknownWorkload(c.Workload))
	}
	if c.Clients < 1 {
		return fmt.Errorf("bench: clients must be at least 1, got %d", c.Clients)
	}
	if c.Keys == 0 {
		c.Keys = wl.Keys
	}
	if c.Keys < 1 {
		return fmt.Errorf("bench: keys must be at least 1, got %d", c.Keys)
	}
	if c.Permits == 0 && c.Workload == Semaphore {
		c.Permits = c.Clients
	}
	if c.Workload == Semaphore && (c.Permits < 1 || c.Permits > maxPermits) {
		return fmt.Errorf("bench: permits must lie within 1..%d, got %d", maxPermits, c.Permits)
	}
	if c.TTL == 0 {
		c.TTL = 10 * time.Second
	}
	if c.OpTimeout == 0 {
		c.OpTimeout = 5 * time.Second
	}
	if c.Duration <= 0 {
		return fmt.Errorf("bench: duration must be positive, got %v", c.Duration)
	}
	if c.Warmup < 0 {
		return fmt.Errorf("bench: warmup must not be negative, got %v", c.Warmup)
	}
	if c.Target == "" {
		c.Target = "fencer"
	}
	return nil
}

var (
	errGaveUp   = errors.New("bench: the wait ended without a grant")
	errNotOwner = errors.New("bench: release answered 0: the lock was not held by this owner (expired or taken)")
)

// keyState is the harness's own view of one contended name.
type keyState struct {
	holders    atomic.Int32
	lastHolder atomic.Int32
	lastToken  atomic.Uint64
	_          [48]byte // keep hot keys on separate cache lines
}

// clientStats is one client goroutine's tally, merged after the run.
type clientStats struct {
	acq, rel      Latencies
	ops, handoffs int64
	errs, gaveUp  int64
	warmErrs      int64
	overlaps      int64
	regressions   int64
	lastToken     uint64
	firstErr      error
}

func (s *clientStats) fail(err error, measured bool) {
	if s.firstErr == nil {
		s.firstErr = err
	}
	if !measured {
		s.warmErrs++
		return
	}
	s.errs++
	if errors.Is(err, errGaveUp) || errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
		s.gaveUp++
	}
}

// Run runs one workload against a fencer cluster and returns its result.
// Every acquire uses a fresh owner: fencer refuses an owner's acquire of a
// key whose release by that owner it remembers. A cancelled ctx ends the
// run early with Result.Error set.
func Run(ctx context.Context, cfg Config) Result {
	res := Result{Target: cfg.Target, Workload: cfg.Workload, Clients: cfg.Clients, Load1: Load1()}
	if err := cfg.setDefaults(); err != nil {
		res.Error = err.Error()
		return res
	}
	res.Target = cfg.Target
	contended := cfg.Workload == Contended
	if contended || cfg.Workload == ReadShared || cfg.Workload == Semaphore {
		res.Keys = cfg.Keys
	}
	runID := randHex(4)
	prefix := "fb-" + runID

	conns := make([]*conn, cfg.Clients)
	closeAll := func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}
	for i := range conns {
		c, err := dial(cfg.Addrs[i%len(cfg.Addrs)], 5*time.Second)
		if err != nil {
			closeAll()
			res.Error = fmt.Sprintf("client %d: %v", i, err)
			return res
		}
		conns[i] = c
	}

	shared := make([]string, cfg.Keys)
	for k := range shared {
		shared[k] = prefix + "/c/" + strconv.Itoa(k)
	}
	keys := make([]keyState, cfg.Keys)

	start := time.Now()
	measureStart := start.Add(cfg.Warmup)
	end := measureStart.Add(cfg.Duration)
	w := &workload{cfg: &cfg, prefix: prefix, shared: shared, keys: keys, measureStart: measureStart, end: end}

	// Ctrl-C: closing the connections ends every request in flight.
	var stopped atomic.Bool
	var mu sync.Mutex
	stop := context.AfterFunc(ctx, func() {
		stopped.Store(true)
		mu.Lock()
		defer mu.Unlock()
		closeAll()
	})
	defer stop()

	stats := make([]clientStats, cfg.Clients)
	var wg sync.WaitGroup
	for id := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if cfg.Workload == ReadShared || cfg.Workload == Semaphore {
				w.sharedClient(id, conns, &mu, &stopped, &stats[id])
				return
			}
			w.client(id, conns, &mu, &stopped, &stats[id])
		}()
	}

	select {
	case <-time.After(time.Until(measureStart)):
	case <-ctx.Done():
	}
	cpu0, ru0 := HostCPU(), ProcCPU()
	select {
	case <-time.After(time.Until(end)):
	case <-ctx.Done():
	}
	cpu1, ru1 := HostCPU(), ProcCPU()
	wg.Wait()
	mu.Lock()
	closeAll()
	mu.Unlock()
	if ctx.Err() != nil {
		res.Error = "interrupted: " + ctx.Err().Error()
		return res
	}

	window := end.Sub(measureStart)
	res.Seconds = window.Seconds()
	res.ClientCPUPct = CPUPct(ru1-ru0, window)
	res.HostCPUPct = cpu0.BusyPct(cpu1)

	var acq, rel Latencies
	var handoffs int64
	for i := range stats {
		s := &stats[i]
		acq = append(acq, s.acq...)
		rel = append(rel, s.rel...)
		res.Ops += s.ops
		handoffs += s.handoffs
		res.Errors += s.errs
		res.GaveUp += s.gaveUp
		res.WarmupErrors += s.warmErrs
		res.Overlaps += s.overlaps
		res.TokenRegressions += s.regressions
		res.LastToken = max(res.LastToken, s.lastToken)
		if res.FirstError == "" && s.firstErr != nil {
			res.FirstError = s.firstErr.Error()
		}
	}
	res.OpsPerS = round1(float64(res.Ops) / window.Seconds())
	if contended {
		res.HandoffsPerS = round1(float64(handoffs) / window.Seconds())
	}
	acq.Sort()
	rel.Sort()
	res.AcqP50, res.AcqP99, res.AcqP999, res.AcqMax = acq.Pct(0.50), acq.Pct(0.99), acq.Pct(0.999), acq.Pct(1)
	res.RelP50, res.RelP99 = rel.Pct(0.50), rel.Pct(0.99)
	return res
}

// workload is what the clients of one run share.
type workload struct {
	cfg               *Config
	prefix            string
	shared            []string
	keys              []keyState
	measureStart, end time.Time
}

// client is one client goroutine: acquire, check, release, until the end.
func (w *workload) client(id int, conns []*conn, mu *sync.Mutex, stopped *atomic.Bool, st *clientStats) {
	cfg := w.cfg
	contended := cfg.Workload == Contended
	rng := rand.New(rand.NewPCG(uint64(id), uint64(time.Now().UnixNano())))
	own := make([]string, cfg.Keys)
	ownTok := make([]uint64, cfg.Keys)
	for j := range own {
		own[j] = w.prefix + "/u/" + strconv.Itoa(id) + "/" + strconv.Itoa(j)
	}
	owner := []byte(w.prefix + "-" + strconv.Itoa(id) + "-")
	ownerLen := len(owner)
	st.acq = make(Latencies, 0, 4096)
	st.rel = make(Latencies, 0, 4096)
	var wait time.Duration
	if contended {
		// The server answers null when the wait ends; leave time for that
		// answer to arrive within the op timeout.
		wait = max(cfg.OpTimeout-100*time.Millisecond, time.Millisecond)
	}
	c := conns[id]
	// redial replaces a connection left in an unknown state by an error.
	redial := w.redialer(id, conns, mu, stopped, &c)

	for seq := uint64(0); ; seq++ {
		if stopped.Load() || !time.Now().Before(w.end) {
			return
		}
		var name string
		var ks *keyState
		var lastTok *uint64
		if contended {
			k := rng.IntN(len(w.shared))
			name, ks = w.shared[k], &w.keys[k]
		} else {
			name, lastTok = own[seq%uint64(len(own))], &ownTok[seq%uint64(len(own))]
		}
		owner = strconv.AppendUint(owner[:ownerLen], seq, 10)

		t0 := time.Now()
		tok, err := c.Acquire(name, owner, cfg.TTL, wait, minTime(t0.Add(cfg.OpTimeout), w.end))
		t1 := time.Now()
		measured := !t0.Before(w.measureStart)
		if err == nil && tok == 0 {
			err = errGaveUp
		}
		if err != nil {
			if stopped.Load() || !t1.Before(w.end) {
				return // the run ended while we waited: not a failure
			}
			st.fail(fmt.Errorf("acquire %s: %w", name, err), measured)
			if _, server := err.(ServerError); !server && !errors.Is(err, errGaveUp) {
				if !redial() {
					time.Sleep(10 * time.Millisecond)
				}
			}
			continue
		}

		st.lastToken = max(st.lastToken, tok)
		if ks != nil {
			if ks.holders.Add(1) != 1 {
				st.overlaps++
			}
			if prev := ks.lastHolder.Swap(int32(id + 1)); prev != int32(id+1) && measured {
				st.handoffs++
			}
			if prev := ks.lastToken.Swap(tok); tok <= prev {
				st.regressions++
			}
			// Leave the critical section before asking the server to
			// release, so the next holder can never see our count.
			ks.holders.Add(-1)
		} else {
			if tok <= *lastTok {
				st.regressions++
			}
			*lastTok = tok
		}

		if w.release(c, name, owner, t0, t1, measured, stopped, redial, st) {
			return
		}
	}
}

// redialer returns the function a client calls to replace its connection
// c (conns[id]) after a transport error; it reports false if it could not,
// or the run stopped.
func (w *workload) redialer(id int, conns []*conn, mu *sync.Mutex, stopped *atomic.Bool, c **conn) func() bool {
	cfg := w.cfg
	return func() bool {
		(*c).Close()
		nc, err := dial(cfg.Addrs[id%len(cfg.Addrs)], cfg.OpTimeout)
		if err != nil {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		if stopped.Load() {
			nc.Close()
			return false
		}
		conns[id], *c = nc, nc
		return true
	}
}

// release releases name, acquired at t0 and granted at t1, and records the
// pair's latencies if it is measured; it reports true if the run stopped.
func (w *workload) release(c *conn, name string, owner []byte, t0, t1 time.Time, measured bool, stopped *atomic.Bool, redial func() bool, st *clientStats) bool {
	n, err := c.Release(name, owner, t1.Add(w.cfg.OpTimeout))
	t2 := time.Now()
	if err == nil && n != 1 {
		err = errNotOwner
	}
	if err != nil {
		if stopped.Load() {
			return true
		}
		st.fail(fmt.Errorf("release %s: %w", name, err), measured)
		if _, server := err.(ServerError); !server && !errors.Is(err, errNotOwner) {
			if !redial() {
				time.Sleep(10 * time.Millisecond)
			}
		}
		return false
	}
	if measured && !t2.After(w.end) {
		st.ops++
		st.acq = append(st.acq, t1.Sub(t0))
		st.rel = append(st.rel, t2.Sub(t1))
	}
	return false
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = crand.Read(b)
	return hex.EncodeToString(b)
}
